-- Attempt i orders i % 4 + 1 units (1, 2, 3, 4, 1, …) from a stock of 10:
-- which orders fit depends on the order they arrive in. Taken only where
-- enough is left, in the same statement: correct, whatever the order.
BEGIN;
UPDATE stock_{{.RunID}} SET units = units - ({{.Attempt}} % 4 + 1) WHERE code = '{{.Token}}' AND units >= {{.Attempt}} % 4 + 1;
\if :ROW_COUNT = 0
  \decline not enough left
\endif
INSERT INTO orders_{{.RunID}} (code, qty) VALUES ('{{.Token}}', {{.Attempt}} % 4 + 1);
COMMIT;
