-- The same orders, the row locked before it is read (SELECT … FOR UPDATE):
-- the others wait for the commit, then read what is left. Correct.
BEGIN;
SELECT units, {{.Attempt}} % 4 + 1 AS qty FROM stock_{{.RunID}} WHERE code = '{{.Token}}' FOR UPDATE \gset
\if :units >= :qty
  UPDATE stock_{{.RunID}} SET units = units - :qty WHERE code = '{{.Token}}';
  INSERT INTO orders_{{.RunID}} (code, qty) VALUES ('{{.Token}}', :qty);
\else
  \decline not enough left
\endif
COMMIT;
