-- Take one only where one is left, in the same statement.
UPDATE items_{{.RunID}} SET stock = stock - 1 WHERE code = '{{.Token}}' AND stock > 0;
\if :ROW_COUNT = 0
  \decline sold out
\endif
