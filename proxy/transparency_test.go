package proxy

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Outside a burst the proxy relays everything: every protocol path a
// driver takes gives the same answers as the server does directly.

func TestPostgresTransparent(t *testing.T) {
	f := start(t, servers[0], Config{})
	tb := f.table("kv", "(k int PRIMARY KEY, v text)")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, f.p.ServiceURL())
	if err != nil {
		t.Fatalf("connecting through the proxy: %v", err)
	}
	defer conn.Close(ctx)

	// Simple protocol, several statements in one Query.
	if _, err := conn.Exec(ctx, "INSERT INTO "+tb+" VALUES (1, 'one'); INSERT INTO "+tb+" VALUES (2, 'two')", pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatalf("simple protocol: %v", err)
	}
	// Extended protocol, unnamed statement, and the statement cache.
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeExec, pgx.QueryExecModeDescribeExec, pgx.QueryExecModeCacheStatement, pgx.QueryExecModeCacheDescribe} {
		k := 10 + int(mode)
		if _, err := conn.Exec(ctx, "INSERT INTO "+tb+" VALUES ($1, $2)", mode, k, fmt.Sprint("mode ", mode)); err != nil {
			t.Fatalf("extended protocol (%v): %v", mode, err)
		}
		var v string
		if err := conn.QueryRow(ctx, "SELECT v FROM "+tb+" WHERE k = $1", mode, k).Scan(&v); err != nil || v != fmt.Sprint("mode ", mode) {
			t.Fatalf("reading back (%v): %q, %v", mode, v, err)
		}
	}
	// A named prepared statement.
	if _, err := conn.Prepare(ctx, "ins", "INSERT INTO "+tb+" VALUES ($1, $2)"); err != nil {
		t.Fatalf("prepare: %v", err)
	}
	for k := 100; k < 105; k++ {
		if _, err := conn.Exec(ctx, "ins", k, "prepared"); err != nil {
			t.Fatalf("executing the prepared statement: %v", err)
		}
	}
	// A server error passes through unchanged.
	_, err = conn.Exec(ctx, "INSERT INTO "+tb+" VALUES (1, 'again')")
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "23505" {
		t.Fatalf("duplicate key through the proxy: got %v, want SQLSTATE 23505", err)
	}
	// A transaction, and a result larger than any buffer.
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var sum, n int64
	if err := tx.QueryRow(ctx, "SELECT sum(g), count(*) FROM generate_series(1, 200000) g").Scan(&sum, &n); err != nil || n != 200000 || sum != 200000*200001/2 {
		t.Fatalf("aggregate: %d %d %v", sum, n, err)
	}
	rows, err := tx.Query(ctx, "SELECT g, repeat('x', 100) FROM generate_series(1, 50000) g")
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for rows.Next() {
		var g int
		var s string
		if err := rows.Scan(&g, &s); err != nil || len(s) != 100 {
			t.Fatalf("row %d: %v", got, err)
		}
		got++
	}
	if rows.Err() != nil || got != 50000 {
		t.Fatalf("rows: %d, %v", got, rows.Err())
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if n := f.count("SELECT count(*) FROM " + tb); n != 11 {
		t.Fatalf("rows at the server: %d, want 11", n)
	}

	// A pool of several long-lived connections, used at once.
	pool, err := pgxpool.New(ctx, f.p.ServiceURL()+"&pool_max_conns=6")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	db := f.open(6)
	var wg sync.WaitGroup
	errs := make(chan error, 12)
	for w := range 12 {
		wg.Go(func() {
			for i := range 20 {
				k := 1000 + w*100 + i
				var err error
				if w%2 == 0 {
					_, err = pool.Exec(ctx, "INSERT INTO "+tb+" VALUES ($1, 'pool')", k)
				} else {
					_, err = db.ExecContext(ctx, "INSERT INTO "+tb+" VALUES ($1, 'stdlib')", k)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("pooled insert: %v", err)
	}
	if n := f.count("SELECT count(*) FROM " + tb + " WHERE k >= 1000"); n != 240 {
		t.Fatalf("pooled rows at the server: %d, want 240", n)
	}
}

func TestMySQLTransparent(t *testing.T) {
	f := start(t, servers[1], Config{})
	tb := f.table("kv", "(k INT PRIMARY KEY, v VARCHAR(200), b BLOB, d DATETIME(6), f DOUBLE) ENGINE=InnoDB")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	db := f.open(6)

	// Prepared statements on the server (interpolateParams=false).
	ins, err := db.PrepareContext(ctx, "INSERT INTO "+tb+" (k, v, b, d, f) VALUES (?, ?, ?, ?, ?)")
	if err != nil {
		t.Fatalf("prepare through the proxy: %v", err)
	}
	when := time.Date(2026, 1, 2, 3, 4, 5, 600000000, time.UTC)
	for k := 1; k <= 5; k++ {
		if _, err := ins.ExecContext(ctx, k, strings.Repeat("v", k), []byte{0, 1, 0xFE, 0xFF}, when, 1.5); err != nil {
			t.Fatalf("executing the prepared insert: %v", err)
		}
	}
	ins.Close()
	var v string
	var b []byte
	var d time.Time
	var fl float64
	if err := db.QueryRowContext(ctx, "SELECT v, b, d, f FROM "+tb+" WHERE k = ?", 3).Scan(&v, &b, &d, &fl); err != nil {
		t.Fatalf("reading back: %v", err)
	}
	if v != "vvv" || string(b) != "\x00\x01\xfe\xff" || !d.Equal(when) || fl != 1.5 {
		t.Fatalf("read back %q %x %v %v", v, b, d, fl)
	}
	// A server error passes through unchanged.
	_, err = db.ExecContext(ctx, "INSERT INTO "+tb+" (k) VALUES (?)", 1)
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1062 {
		t.Fatalf("duplicate key through the proxy: got %v, want 1062", err)
	}
	// A transaction, and results larger than a packet buffer, as text and
	// as binary rows.
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO "+tb+" (k, v) SELECT 100 + seq, REPEAT('x', 150) FROM seq_1_to_20000"); err != nil {
		if _, err2 := tx.ExecContext(ctx, "INSERT INTO "+tb+" (k, v) WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < 20000) SELECT 100 + n, REPEAT('x', 150) FROM s"); err2 != nil {
			t.Fatalf("bulk insert: %v; %v", err, err2)
		}
	}
	for _, args := range [][]any{nil, {0}} {
		q := "SELECT k, v FROM " + tb + " WHERE k >= 100"
		if args != nil {
			q += " AND k > ?" // with an argument: a prepared statement, binary rows
		}
		rows, err := tx.QueryContext(ctx, q, args...)
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for rows.Next() {
			var k int
			var s string
			if err := rows.Scan(&k, &s); err != nil || len(s) != 150 {
				t.Fatalf("row %d: %v", got, err)
			}
			got++
		}
		if rows.Err() != nil || got != 20000 {
			t.Fatalf("rows (args %v): %d, %v", args, got, rows.Err())
		}
		rows.Close()
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if n := f.count("SELECT count(*) FROM " + tb); n != 5 {
		t.Fatalf("rows at the server after the rollback: %d, want 5", n)
	}

	// A pool of several long-lived connections, used at once.
	var wg sync.WaitGroup
	errs := make(chan error, 12)
	for w := range 12 {
		wg.Go(func() {
			for i := range 20 {
				if _, err := db.ExecContext(ctx, "INSERT INTO "+tb+" (k, v) VALUES (?, 'pool')", 1000+w*100+i); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("pooled insert: %v", err)
	}
	if n := f.count("SELECT count(*) FROM " + tb + " WHERE k >= 1000"); n != 240 {
		t.Fatalf("pooled rows at the server: %d, want 240", n)
	}
}

// A client that asks for TLS is told the proxy has none; one that
// demands it fails to connect rather than going on in plaintext.
func TestTLSRefused(t *testing.T) {
	t.Run("postgres", func(t *testing.T) {
		f := start(t, servers[0], Config{})
		c, err := net.Dial("tcp", f.p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		req := make([]byte, 8)
		binary.BigEndian.PutUint32(req[0:4], 8)
		binary.BigEndian.PutUint32(req[4:8], pgSSLRequest)
		c.Write(req)
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		ans := make([]byte, 1)
		if _, err := io.ReadFull(c, ans); err != nil || ans[0] != 'N' {
			t.Fatalf("answer to SSLRequest: %q, %v; want N", ans, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		u := strings.Replace(f.p.ServiceURL(), "sslmode=disable", "sslmode=require", 1)
		if _, err := pgx.Connect(ctx, u); err == nil {
			t.Fatal("sslmode=require connected through the proxy; want a refusal")
		}
		prefer := strings.Replace(f.p.ServiceURL(), "sslmode=disable", "sslmode=prefer", 1)
		conn, err := pgx.Connect(ctx, prefer)
		if err != nil {
			t.Fatalf("sslmode=prefer through the proxy: %v", err)
		}
		conn.Close(ctx)
	})
	t.Run("mysql", func(t *testing.T) {
		f := start(t, servers[1], Config{})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		for _, tls := range []string{"preferred", "false"} {
			db := mustOpenMySQL(t, f.p.ServiceURL(), tls)
			if err := db.PingContext(ctx); err != nil {
				t.Fatalf("tls=%s through the proxy: %v", tls, err)
			}
		}
		db := mustOpenMySQL(t, f.p.ServiceURL(), "true")
		if err := db.PingContext(ctx); err == nil {
			t.Fatal("tls=true connected through the proxy; want a refusal")
		}
	})
}
