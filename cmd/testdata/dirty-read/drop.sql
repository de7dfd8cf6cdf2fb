DROP TABLE racetest_{{.RunID}}_kv;
DROP TABLE racetest_{{.RunID}}_seen;
