-- The issue's false SAFE: one script, attempt A the reader, B the writer.
\if {{.Attempt}} = 1
BEGIN;
UPDATE racetest_{{.RunID}}_kv SET v = 1 WHERE k = '{{.Token}}';
ROLLBACK;
\elif {{.Attempt}} = 0
BEGIN;
SELECT v AS a FROM racetest_{{.RunID}}_kv WHERE k = '{{.Token}}' \gset
SELECT v AS b FROM racetest_{{.RunID}}_kv WHERE k = '{{.Token}}' \gset
COMMIT;
INSERT INTO racetest_{{.RunID}}_seen (k) SELECT '{{.Token}}' FROM racetest_{{.RunID}}_kv WHERE k = '{{.Token}}' AND :a + :b >= 0;
INSERT INTO racetest_{{.RunID}}_seen (k) SELECT '{{.Token}}' FROM racetest_{{.RunID}}_kv WHERE k = '{{.Token}}' AND :a + :b > 0;
\endif
