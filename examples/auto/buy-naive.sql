-- Check the stock, then take one: every attempt that checks before the
-- others take sells, and the stock goes below zero.
BEGIN;
SELECT stock FROM items_{{.RunID}} WHERE code = '{{.Token}}' \gset
\if :stock > 0
  UPDATE items_{{.RunID}} SET stock = stock - 1 WHERE code = '{{.Token}}';
\else
  \decline sold out
\endif
COMMIT;
