-- Hermitage's G1a reader: two reads in one transaction, then one row for
-- the read and a second one if either read saw the writer's value.
BEGIN;
SELECT v AS a FROM racetest_{{.RunID}}_kv WHERE k = '{{.Token}}' \gset
SELECT v AS b FROM racetest_{{.RunID}}_kv WHERE k = '{{.Token}}' \gset
COMMIT;
INSERT INTO racetest_{{.RunID}}_seen (k) SELECT '{{.Token}}' FROM racetest_{{.RunID}}_kv WHERE k = '{{.Token}}' AND :a + :b >= 0;
INSERT INTO racetest_{{.RunID}}_seen (k) SELECT '{{.Token}}' FROM racetest_{{.RunID}}_kv WHERE k = '{{.Token}}' AND :a + :b > 0;
