-- Read the balance, add 10 in the application, write it back: deposits
-- that read the same balance overwrite each other (a lost update).
BEGIN;
SELECT balance FROM accounts_{{.RunID}} WHERE code = '{{.Token}}' \gset
UPDATE accounts_{{.RunID}} SET balance = :balance + 10 WHERE code = '{{.Token}}';
COMMIT;
