package httpfire_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/racetest/racetest/httpfire"
	"github.com/racetest/racetest/internal/sqldb"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"

	"github.com/racetest/racetest/internal/redisdb"
	"github.com/racetest/racetest/internal/testenv"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// effectsRun fires bursts at an endpoint that records an effect with record
// on success, reading the store with the effects check spec, and checks that
// the count the check reads is the one the endpoint made — which is not
// what it answered: it answers 200 even when it wrote nothing.
func effectsRun(t *testing.T, p scenarios.Params, spec string, record func(ctx context.Context, token string) error) {
	t.Helper()
	srv := newServer(t, plainH1, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		tok := r.URL.Query().Get("token")
		// Only attempt 0 writes; everyone is told "ok".
		if r.URL.Query().Get("attempt") == "0" {
			if err := record(r.Context(), tok); err != nil {
				http.Error(w, err.Error(), 500)
				return
			}
		}
		fmt.Fprintln(w, "ok")
	}))
	target, err := httpfire.New(httpfire.Config{
		Method: "POST", URL: srv.URL + "/?token={{.Token}}&attempt={{.Attempt}}", Effects: spec, Release: httpfire.LastByte,
	}, p)
	if err != nil {
		t.Fatal(err)
	}
	res, err := runner.Run(context.Background(), target, runner.Attempts(4), runner.Bursts(5), runner.Timeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range res.Bursts {
		if b.Effects != 1 || b.Outcomes[runner.Executed] != 4 {
			t.Errorf("burst %d: effects %d (want 1, counted in the store), executed %d (want 4, as the server said)", b.Index, b.Effects, b.Outcomes[runner.Executed])
		}
	}
	if res.Violations() != 0 {
		t.Errorf("%d bursts over the limit: the verdict must follow the effects, not the responses", res.Violations())
	}
	notes := strings.Join(target.Notes(), "\n")
	if !strings.Contains(notes, "said success: 20 responses") || !strings.Contains(notes, "actually happened: 5") {
		t.Errorf("notes:\n%s", notes)
	}
}

func TestEffectsRedis(t *testing.T) {
	// The client closes after the keys are gone: cleanups run last first.
	client := testenv.Redis(t)
	p := params()
	p.Conn.Set("redis", testenv.URL("redis"))
	var keys []string
	t.Cleanup(func() {
		if len(keys) > 0 {
			client.Del(context.Background(), keys...)
		}
	})
	effectsRun(t, p, "redis:GET "+p.Prefix()+"{{.Token}}", func(ctx context.Context, tok string) error {
		keys = append(keys, p.Prefix()+tok)
		return client.Incr(ctx, p.Prefix()+tok).Err()
	})
}

func TestEffectsMySQL(t *testing.T) {
	dsn := testenv.Conn("mysql")
	cfg, err := sqldb.MySQLConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	t.Cleanup(func() { db.Close() }) // after the table is dropped
	ctx := context.Background()
	if err := db.PingContext(ctx); err != nil {
		testenv.Unavailable(t, "mysql", err)
	}
	p := params()
	p.Conn.Set("mysql", dsn)
	table := p.Prefix() + "saves"
	if _, err := db.ExecContext(ctx, "CREATE TABLE `"+table+"` (token VARCHAR(64) NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.ExecContext(context.Background(), "DROP TABLE `"+table+"`") })
	effectsRun(t, p, "sql:mysql:SELECT COUNT(*) FROM `"+table+"` WHERE token = '{{.Token}}'", func(ctx context.Context, tok string) error {
		_, err := db.ExecContext(ctx, "INSERT INTO `"+table+"` (token) VALUES (?)", tok)
		return err
	})
}

func TestEffectsPostgres(t *testing.T) {
	url := testenv.URL("postgres")
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		testenv.Unavailable(t, "postgres", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) }) // after the table is dropped
	p := params()
	p.Conn.Set("postgres", url)
	table := p.Prefix() + "saves"
	if _, err := conn.Exec(ctx, "CREATE TABLE "+table+" (token text NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Exec(context.Background(), "DROP TABLE "+table) })
	pool := make(chan struct{}, 1) // one pgx.Conn: one statement at a time
	effectsRun(t, p, "sql:postgres:SELECT count(*) FROM "+table+" WHERE token = '{{.Token}}'", func(ctx context.Context, tok string) error {
		pool <- struct{}{}
		defer func() { <-pool }()
		_, err := conn.Exec(ctx, "INSERT INTO "+table+" (token) VALUES ($1)", tok)
		return err
	})
}

// An effects check that cannot reach its store stops the run before the
// first burst, with the address and without the password.
func TestEffectsStoreUnreachable(t *testing.T) {
	srv := newServer(t, plainH1, http.NotFoundHandler())
	p := params()
	p.Conn.Set("redis", "redis://:hunter2@127.0.0.1:1/0")
	target, err := httpfire.New(httpfire.Config{URL: srv.URL, Effects: "redis:GET x"}, p)
	if err != nil {
		t.Fatal(err)
	}
	_, err = runner.Run(context.Background(), target, runner.Attempts(2), runner.Bursts(1))
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("err = %v", err)
	}
}

func TestEffectsMongo(t *testing.T) {
	uri := testenv.URL("mongo")
	client, err := mongo.Connect(options.Client().ApplyURI(uri).SetServerSelectionTimeout(2 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	t.Cleanup(func() { client.Disconnect(context.Background()) }) // after the collection is dropped
	if err := client.Ping(ctx, nil); err != nil {
		testenv.Unavailable(t, "mongo", err)
	}
	p := params()
	p.Conn.Set("mongo", uri)
	coll := client.Database("racetest").Collection(p.Prefix() + "saves")
	t.Cleanup(func() { coll.Drop(context.Background()) })
	effectsRun(t, p, "mongo:racetest."+p.Prefix()+`saves:{"token": "{{.Token}}"}`, func(ctx context.Context, tok string) error {
		_, err := coll.InsertOne(ctx, bson.D{{Key: "token", Value: tok}})
		return err
	})
}

// checkRun fires one small burst at a server that says ok, judged by spec,
// and returns the run's error.
func checkRun(t *testing.T, p scenarios.Params, spec string) error {
	t.Helper()
	srv := newServer(t, plainH1, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		fmt.Fprintln(w, "ok")
	}))
	target, err := httpfire.New(httpfire.Config{Method: "POST", URL: srv.URL + "/?token={{.Token}}", Effects: spec}, p)
	if err != nil {
		return err
	}
	_, err = runner.Run(context.Background(), target, runner.Attempts(2), runner.Bursts(1), runner.Timeout(5*time.Second))
	return err
}

// A check returns exactly one value, and a Redis check only reads: on the
// servers, before a burst counts anything.
func TestChecksOnTheServersReturnOneValueAndOnlyRead(t *testing.T) {
	t.Run("postgres", func(t *testing.T) {
		testenv.SQL(t, sqldb.Postgres)
		p := params()
		p.Conn.Set("postgres", testenv.URL("postgres"))
		if err := checkRun(t, p, "sql:postgres:SELECT 1 UNION ALL SELECT 2"); err == nil || !strings.Contains(err.Error(), "returned 2 rows") {
			t.Errorf("two rows: %v, want refused, naming them", err)
		}
		if err := checkRun(t, p, "sql:postgres:SELECT 0"); err != nil {
			t.Errorf("one row: %v", err)
		}
	})
	t.Run("mysql", func(t *testing.T) {
		testenv.SQL(t, sqldb.MySQL)
		p := params()
		p.Conn.Set("mysql", testenv.URL("mysql"))
		if err := checkRun(t, p, "sql:mysql:SELECT 1 UNION ALL SELECT 2"); err == nil || !strings.Contains(err.Error(), "returned 2 rows") {
			t.Errorf("two rows: %v, want refused, naming them", err)
		}
		if err := checkRun(t, p, "sql:mysql:SELECT 0"); err != nil {
			t.Errorf("one row: %v", err)
		}
	})
	t.Run("redis", func(t *testing.T) {
		client := testenv.Redis(t)
		p := params()
		p.Conn.Set("redis", testenv.URL("redis"))
		key := p.Prefix() + "{{.Token}}"
		if err := checkRun(t, p, "redis:MGET "+key+" "+key+"x"); err == nil || !strings.Contains(err.Error(), "an array of 2 elements") {
			t.Errorf("an array of two: %v, want refused, naming it", err)
		}
		if err := checkRun(t, p, "redis:MGET "+key); err != nil {
			t.Errorf("an array of one: %v, want its element read", err)
		}
		var we *redisdb.WriteError
		if err := checkRun(t, p, "redis:DEL "+key); !errors.As(err, &we) {
			t.Errorf("DEL: %v, want refused as a write", err)
		}
		if n, _ := client.Exists(context.Background(), p.Prefix()+"racetest_sample_0").Result(); n != 0 {
			t.Errorf("a key of the sample was left")
		}
	})
}
