-- The writer changes the row and takes it back: no committed state ever
-- holds v = 1.
BEGIN;
UPDATE racetest_{{.RunID}}_kv SET v = 1 WHERE k = '{{.Token}}';
ROLLBACK;
