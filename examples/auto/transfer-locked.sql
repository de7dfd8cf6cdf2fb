-- Attempt i moves 40 from wallet i % 2 to the other (wallets of 100 each):
-- how many succeed depends on the order (three out of wallet 0 in a row
-- empty it). Both wallets locked, in one order, before either is read:
-- correct, whatever the order.
BEGIN;
SELECT owner FROM wallets_{{.RunID}} WHERE code = '{{.Token}}' ORDER BY owner FOR UPDATE;
SELECT balance FROM wallets_{{.RunID}} WHERE code = '{{.Token}}' AND owner = {{.Attempt}} % 2 \gset
\if :balance >= 40
  UPDATE wallets_{{.RunID}} SET balance = balance - 40 WHERE code = '{{.Token}}' AND owner = {{.Attempt}} % 2;
  UPDATE wallets_{{.RunID}} SET balance = balance + 40 WHERE code = '{{.Token}}' AND owner = 1 - {{.Attempt}} % 2;
  INSERT INTO transfers_{{.RunID}} (code, amount) VALUES ('{{.Token}}', 40);
\else
  \decline insufficient funds
\endif
COMMIT;
