-- The same transfers, balances read and written back by the application,
-- each statement on its own (no transaction): two that read the same
-- balance overwrite each other (money appears or vanishes). In one
-- transaction, two transfers the opposite way would mostly deadlock
-- instead: an error, not a race.
SELECT balance AS src FROM wallets_{{.RunID}} WHERE code = '{{.Token}}' AND owner = {{.Attempt}} % 2 \gset
SELECT balance AS dst FROM wallets_{{.RunID}} WHERE code = '{{.Token}}' AND owner = 1 - {{.Attempt}} % 2 \gset
\if :src >= 40
  UPDATE wallets_{{.RunID}} SET balance = :src - 40 WHERE code = '{{.Token}}' AND owner = {{.Attempt}} % 2;
  UPDATE wallets_{{.RunID}} SET balance = :dst + 40 WHERE code = '{{.Token}}' AND owner = 1 - {{.Attempt}} % 2;
  INSERT INTO transfers_{{.RunID}} (code, amount) VALUES ('{{.Token}}', 40);
\else
  \decline insufficient funds
\endif
