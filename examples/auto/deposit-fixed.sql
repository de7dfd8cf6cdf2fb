-- Let the database add: no read, nothing to overwrite.
UPDATE accounts_{{.RunID}} SET balance = balance + 10 WHERE code = '{{.Token}}';
