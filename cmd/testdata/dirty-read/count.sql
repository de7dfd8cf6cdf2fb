SELECT COUNT(*) FROM racetest_{{.RunID}}_seen WHERE k = '{{.Token}}';
