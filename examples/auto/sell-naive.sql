-- The same orders, checked and then taken: every attempt that reads before
-- the others take sells, and the stock goes below zero.
BEGIN;
SELECT units, {{.Attempt}} % 4 + 1 AS qty FROM stock_{{.RunID}} WHERE code = '{{.Token}}' \gset
\if :units >= :qty
  UPDATE stock_{{.RunID}} SET units = units - :qty WHERE code = '{{.Token}}';
  INSERT INTO orders_{{.RunID}} (code, qty) VALUES ('{{.Token}}', :qty);
\else
  \decline not enough left
\endif
COMMIT;
