INSERT INTO racetest_{{.RunID}}_kv (k, v) VALUES ('{{.Token}}', 0);
