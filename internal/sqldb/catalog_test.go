package sqldb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
)

// Each way a statement on one table reaches another makes the table
// unknown to explore, read from the catalog of the real server: a
// trigger, a foreign key (both ends), a rule, a view, inheritance, a
// partitioned table, row-level security, a default calling the user's
// function. A plain table is not, and a name the catalog does not hold is.
func TestHiddenReach(t *testing.T) {
	type kind struct {
		name  string
		setup []string // {{t}} is the table asked about, {{o}} another
		want  string   // a part of why; "" for a plain table
	}
	pg := []kind{
		{"plain", []string{"CREATE TABLE {{t}} (id INT PRIMARY KEY)"}, ""},
		{"trigger", []string{"CREATE TABLE {{o}} (id INT)", "CREATE TABLE {{t}} (id INT)",
			"CREATE FUNCTION {{o}}_f() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN INSERT INTO {{o}} VALUES (NEW.id); RETURN NEW; END$$",
			"CREATE TRIGGER {{o}}_tr AFTER INSERT ON {{t}} FOR EACH ROW EXECUTE FUNCTION {{o}}_f()"}, "a trigger"},
		{"foreign key (referencing)", []string{"CREATE TABLE {{o}} (id INT PRIMARY KEY)",
			"CREATE TABLE {{t}} (id INT REFERENCES {{o}} (id) ON DELETE CASCADE)"}, "a foreign key"},
		{"foreign key (referenced)", []string{"CREATE TABLE {{t}} (id INT PRIMARY KEY)",
			"CREATE TABLE {{o}} (id INT REFERENCES {{t}} (id) ON DELETE CASCADE)"}, "a foreign key"},
		{"rule", []string{"CREATE TABLE {{o}} (id INT)", "CREATE TABLE {{t}} (id INT)",
			"CREATE RULE {{o}}_r AS ON INSERT TO {{t}} DO ALSO INSERT INTO {{o}} VALUES (NEW.id)"}, "a rule"},
		{"view", []string{"CREATE TABLE {{o}} (id INT)", "CREATE VIEW {{t}} AS SELECT * FROM {{o}}"}, "a view"},
		{"inheritance (parent)", []string{"CREATE TABLE {{t}} (id INT)", "CREATE TABLE {{o}} () INHERITS ({{t}})"}, "inheritance"},
		{"inheritance (child)", []string{"CREATE TABLE {{o}} (id INT)", "CREATE TABLE {{t}} () INHERITS ({{o}})"}, "inheritance"},
		{"partitioned", []string{"CREATE TABLE {{t}} (id INT) PARTITION BY RANGE (id)",
			"CREATE TABLE {{o}} PARTITION OF {{t}} FOR VALUES FROM (0) TO (100)"}, "a partitioned table"},
		{"partition", []string{"CREATE TABLE {{o}} (id INT) PARTITION BY RANGE (id)",
			"CREATE TABLE {{t}} PARTITION OF {{o}} FOR VALUES FROM (0) TO (100)"}, "inheritance or a partition"},
		{"row-level security", []string{"CREATE TABLE {{t}} (id INT)", "ALTER TABLE {{t}} ENABLE ROW LEVEL SECURITY"}, "row-level security"},
		{"default calling a function", []string{"CREATE TABLE {{o}} (id INT)",
			"CREATE FUNCTION {{o}}_f() RETURNS INT LANGUAGE sql AS $$INSERT INTO {{o}} VALUES (1) RETURNING id$$",
			"CREATE TABLE {{t}} (id INT DEFAULT {{o}}_f())"}, "a default or check calling"},
		{"missing", nil, "not in the catalog"},
	}
	my := []kind{
		{"plain", []string{"CREATE TABLE {{t}} (id INT PRIMARY KEY)"}, ""},
		{"trigger", []string{"CREATE TABLE {{o}} (id INT)", "CREATE TABLE {{t}} (id INT)",
			"CREATE TRIGGER {{o}}_tr AFTER INSERT ON {{t}} FOR EACH ROW INSERT INTO {{o}} VALUES (NEW.id)"}, "a trigger"},
		{"foreign key (referencing)", []string{"CREATE TABLE {{o}} (id INT PRIMARY KEY) ENGINE=InnoDB",
			"CREATE TABLE {{t}} (id INT, FOREIGN KEY (id) REFERENCES {{o}} (id) ON DELETE CASCADE) ENGINE=InnoDB"}, "a foreign key"},
		{"foreign key (referenced)", []string{"CREATE TABLE {{t}} (id INT PRIMARY KEY) ENGINE=InnoDB",
			"CREATE TABLE {{o}} (id INT, FOREIGN KEY (id) REFERENCES {{t}} (id) ON DELETE CASCADE) ENGINE=InnoDB"}, "a foreign key"},
		{"view", []string{"CREATE TABLE {{o}} (id INT)", "CREATE VIEW {{t}} AS SELECT * FROM {{o}}"}, "a view"},
		{"missing", nil, "not in the catalog"},
	}
	for d, kinds := range map[Dialect][]kind{Postgres: pg, MySQL: my} {
		t.Run(string(d), func(t *testing.T) {
			db := open(t, d, Options{})
			for _, k := range kinds {
				t.Run(k.name, func(t *testing.T) {
					b := make([]byte, 4)
					rand.Read(b)
					tb, other := "racetest_"+hex.EncodeToString(b)+"_reach", "racetest_"+hex.EncodeToString(b)+"_other"
					ctx := context.Background()
					// Dropped in reverse, each object by its kind (a
					// PostgreSQL CASCADE takes what hangs on it).
					t.Cleanup(func() {
						for _, stmt := range dropAll(d, tb, other) {
							_ = db.Exec(context.Background(), stmt)
						}
					})
					for _, s := range k.setup {
						s = strings.NewReplacer("{{t}}", tb, "{{o}}", other).Replace(s)
						if err := db.Exec(ctx, s); err != nil {
							t.Fatalf("%s: %v", s, err)
						}
					}
					var got map[string]string
					err := db.Admin(ctx, func(ctx context.Context, q Querier) error {
						var err error
						got, err = HiddenReach(ctx, d, q, []string{tb})
						return err
					})
					if err != nil {
						t.Fatal(err)
					}
					why, hidden := got[tb]
					if k.want == "" && hidden || k.want != "" && !strings.Contains(why, k.want) {
						t.Errorf("%s: %q (hidden %v), want %q", k.name, why, hidden, k.want)
					}
				})
			}
		})
	}
}

// dropAll drops what a case of TestHiddenReach may have made.
func dropAll(d Dialect, tb, other string) []string {
	if d == Postgres {
		return []string{"DROP VIEW IF EXISTS " + tb, "DROP TABLE IF EXISTS " + tb + " CASCADE", "DROP TABLE IF EXISTS " + other + " CASCADE",
			"DROP FUNCTION IF EXISTS " + other + "_f() CASCADE"}
	}
	return []string{"DROP VIEW IF EXISTS " + tb, "DROP TABLE IF EXISTS " + tb, "DROP TABLE IF EXISTS " + other, "DROP TABLE IF EXISTS " + tb}
}
