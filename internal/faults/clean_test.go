//go:build linux

package faults_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/racetest/racetest/internal/privserver"
	"github.com/racetest/racetest/scenarios/runs"
)

// store makes and lists objects on one private server: the runs' objects,
// and a user's.
type store interface {
	register(t *testing.T, r runs.Record)
	create(t *testing.T, name string) // a table, or a key with a value
	// names lists every object, racetest's registrations as
	// "registered <id>", and the values of keys.
	names(t *testing.T) []string
	close()
}

// 'racetest clean' drops exactly the registered runs its filters select,
// and never a name it did not create: a user's racetest_-looking object
// with no registration, and every other object, stay as they were.
func TestCleanFilters(t *testing.T) {
	privserver.Gate(t)
	host, _ := os.Hostname()
	dead := deadPID(t)
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			privserver.Need(t, b.kind)
			s := privserver.Start(t, b.kind)
			st := openStore(t, b.kind, s.URL)
			defer st.close()
			now := time.Now().UTC().Truncate(time.Millisecond)
			runsMade := []struct {
				rec runs.Record
				why string
			}{
				{runs.Record{RunID: "old", Started: now.Add(-3 * time.Hour), Host: host, PID: dead}, "dead, 3 h old"},
				{runs.Record{RunID: "young", Started: now.Add(-time.Minute), Host: host, PID: dead}, "dead, 1 min old"},
				{runs.Record{RunID: "alive", Started: now.Add(-5 * time.Hour), Host: host, PID: os.Getpid()}, "its process runs"},
				{runs.Record{RunID: "far", Started: now.Add(-30 * time.Minute), Host: "another-host.example", PID: 1}, "another host, 30 min old"},
			}
			for _, r := range runsMade {
				st.register(t, r.rec)
				st.create(t, runs.Prefix(r.rec.RunID)+"a")
				st.create(t, runs.Prefix(r.rec.RunID)+"b")
			}
			// A user's objects: one named like racetest's, never registered
			// (the 'serve --run-id keep' of the issue), and one not.
			st.create(t, "racetest_keep_b1")
			st.create(t, "precious_x")
			user := []string{"racetest_keep_b1", "precious_x"}
			clean := func(args ...string) string {
				t.Helper()
				args = append([]string{"clean", b.flag, s.URL}, args...)
				p := startRacetest(t, args...)
				code, _ := p.wait(t, 2*time.Minute)
				if code != 0 {
					t.Fatalf("racetest %s: exit %d\n%s%s", strings.Join(args, " "), code, p.stdout.String(), p.stderr.String())
				}
				return p.stdout.String()
			}
			has := func(id string) bool {
				return slices.Contains(st.names(t), "registered "+id)
			}
			objectsOf := func(id string) int {
				n := 0
				for _, name := range st.names(t) {
					if strings.HasPrefix(name, runs.Prefix(id)) {
						n++
					}
				}
				return n
			}
			expect := func(step string, present ...string) {
				t.Helper()
				for _, r := range runsMade {
					id := r.rec.RunID
					want := slices.Contains(present, id)
					if has(id) != want || (objectsOf(id) == 2) != want || (!want && objectsOf(id) != 0) {
						t.Errorf("after %s: run %s (%s): registered %v with %d objects, want present=%v", step, id, r.why, has(id), objectsOf(id), want)
					}
				}
				names := st.names(t)
				for _, u := range user {
					if !slices.Contains(names, u) {
						t.Fatalf("after %s: the user's %s is gone (%v)", step, u, names)
					}
				}
			}
			before := st.names(t)

			out := clean("--backend", b.name, "--dry-run")
			if got := st.names(t); !slices.Equal(got, before) {
				t.Fatalf("--dry-run changed the server:\nbefore %v\nafter  %v", before, got)
			}
			for _, want := range []string{"would drop run old", "would drop run young", "kept run alive", "still runs on this host",
				"kept run far", "another host", "left alone racetest_keep_b1"} {
				if !strings.Contains(out, want) {
					t.Errorf("--dry-run does not say %q:\n%s", want, out)
				}
			}
			if strings.Contains(out, "precious") {
				t.Errorf("--dry-run names an object outside racetest's scheme:\n%s", out)
			}

			clean("--backend", b.name, "--older-than", "2h")
			expect("--older-than 2h", "young", "alive", "far")
			clean("--backend", b.name, "--run-id", "young")
			expect("--run-id young", "alive", "far")
			out = clean("--backend", b.name)
			expect("clean without filters", "alive", "far")
			if !strings.Contains(out, "left alone racetest_keep_b1") {
				t.Errorf("clean does not say it left the user's racetest_keep_b1 alone:\n%s", out)
			}
			clean("--backend", b.name, "--older-than", "10m")
			expect("--older-than 10m", "alive")

			// --backend: only that backend is visited.
			for _, other := range backends {
				if other.name != b.name && strings.Contains(out, other.name+" ") {
					t.Errorf("clean --backend %s visited %s:\n%s", b.name, other.name, out)
				}
			}
			// The user's objects kept their values too.
			after := st.names(t)
			for _, u := range user {
				if !slices.Contains(after, u) {
					t.Errorf("the user's %s is gone", u)
				}
			}
		})
	}
	p := startRacetest(t, "clean", "--backend", "nosuch")
	if code, _ := p.wait(t, time.Minute); code != 2 || !strings.Contains(p.stderr.String(), "unknown backend") {
		t.Errorf("clean --backend nosuch: exit %d, want 2 and a message naming the backends:\n%s", code, p.stderr.String())
	}
}

// deadPID returns the pid of a process that has exited.
func deadPID(t *testing.T) int {
	t.Helper()
	c := exec.Command("true")
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	return c.Process.Pid
}

func openStore(t *testing.T, kind privserver.Kind, url string) store {
	t.Helper()
	switch kind {
	case privserver.Redis:
		opt, err := redis.ParseURL(url)
		if err != nil {
			t.Fatal(err)
		}
		return redisStore{redis.NewClient(opt)}
	case privserver.MariaDB:
		db, err := sql.Open("mysql", url)
		if err != nil {
			t.Fatal(err)
		}
		return sqlStore{db, runs.MySQL}
	default:
		db, err := sql.Open("pgx", url)
		if err != nil {
			t.Fatal(err)
		}
		return sqlStore{db, runs.Postgres}
	}
}

type redisStore struct{ cl *redis.Client }

func (r redisStore) register(t *testing.T, rec runs.Record) {
	t.Helper()
	if err := runs.RegisterRedis(context.Background(), r.cl, rec); err != nil {
		t.Fatal(err)
	}
}

func (r redisStore) create(t *testing.T, name string) {
	t.Helper()
	if err := r.cl.Set(context.Background(), name, "value of "+name, 0).Err(); err != nil {
		t.Fatal(err)
	}
}

func (r redisStore) names(t *testing.T) []string {
	t.Helper()
	ctx := context.Background()
	keys, err := r.cl.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, k := range keys {
		if id, ok := runs.RunOf(k); ok && k == runs.Marker(id) {
			out = append(out, "registered "+id)
			continue
		}
		v, err := r.cl.Get(ctx, k).Result()
		if err != nil || v != "value of "+k {
			t.Errorf("key %s holds %q (%v), not what was written", k, v, err)
		}
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func (r redisStore) close() { r.cl.Close() }

type sqlStore struct {
	db *sql.DB
	d  runs.Dialect
}

func (s sqlStore) register(t *testing.T, rec runs.Record) {
	t.Helper()
	if err := runs.RegisterSQL(context.Background(), s.d, runs.Std(s.db), rec); err != nil {
		t.Fatal(err)
	}
}

func (s sqlStore) create(t *testing.T, name string) {
	t.Helper()
	if _, err := s.db.Exec(fmt.Sprintf("CREATE TABLE %s (v VARCHAR(40))", name)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.Exec(fmt.Sprintf("INSERT INTO %s VALUES ('value of %s')", name, name)); err != nil {
		t.Fatal(err)
	}
}

func (s sqlStore) names(t *testing.T) []string {
	t.Helper()
	q := "SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE()"
	if s.d == runs.Postgres {
		q = "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
	}
	rows, err := s.db.Query(q)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		rows.Scan(&n)
		tables = append(tables, n)
	}
	rows.Close()
	var out []string
	for _, n := range tables {
		if n == runs.Table {
			rs, err := s.db.Query("SELECT run_id FROM " + runs.Table)
			if err != nil {
				t.Fatal(err)
			}
			for rs.Next() {
				var id string
				rs.Scan(&id)
				out = append(out, "registered "+id)
			}
			rs.Close()
			continue
		}
		var v string
		if err := s.db.QueryRow("SELECT v FROM " + n).Scan(&v); err != nil || v != "value of "+n {
			t.Errorf("table %s holds %q (%v), not what was written", n, v, err)
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

func (s sqlStore) close() { s.db.Close() }
