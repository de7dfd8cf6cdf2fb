package cmd

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/racetest/racetest/internal/sqldb"
	"github.com/racetest/racetest/internal/testenv"
	"github.com/racetest/racetest/proxy"
	"github.com/racetest/racetest/scenarios"
)

// racetest http --proxy, as a user runs it: a check-then-write service whose
// database URL points at a racetest proxy races in every burst, and the
// report tells what happened at the database; the JSON carries each
// burst's hold. A --proxy address where no proxy answers is exit 2.
func TestHTTPThroughTheProxy(t *testing.T) {
	testenv.SQL(t, sqldb.Postgres) // skips, or fails under RACETEST_REQUIRE_SERVERS, without the server
	upstream := testenv.URL("postgres")
	p, err := proxy.Start(context.Background(), proxy.Config{Upstream: upstream})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	direct, err := sql.Open("pgx", upstream)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { direct.Close() })
	via, err := sql.Open("pgx", p.ServiceURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { via.Close() })
	table := "racetest_" + scenarios.NewRunID() + "_redemptions"
	if _, err := direct.Exec("CREATE TABLE " + table + " (code text NOT NULL)"); err != nil {
		testenv.Unavailable(t, "postgres", err)
	}
	t.Cleanup(func() {
		if _, err := direct.Exec("DROP TABLE " + table); err != nil {
			t.Errorf("dropping %s: %v", table, err)
		}
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		code := r.URL.Query().Get("code")
		var n int
		if err := via.QueryRowContext(r.Context(), "SELECT count(*) FROM "+table+" WHERE code = $1", code).Scan(&n); err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		if n > 0 {
			http.Error(w, "already redeemed", http.StatusConflict)
			return
		}
		if _, err := via.ExecContext(r.Context(), "INSERT INTO "+table+" (code) VALUES ($1)", code); err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		fmt.Fprintln(w, "redeemed")
	}))
	t.Cleanup(srv.Close)
	args := []string{"http", "POST", srv.URL + "/redeem?code={{.Token}}", "-n", "2", "--bursts", "10", "--release", "last-byte",
		"--proxy", p.ControlAddr(), "--postgres-url", upstream,
		"--effects", "sql:postgres:SELECT count(*) FROM " + table + " WHERE code = '{{.Token}}'"}
	t.Setenv("COLUMNS", "1000") // one line per note, as the test reads them
	out, errOut, code := execCmd(t, false, args...)
	if code != exitViolated || !strings.Contains(out, "RACE") ||
		!strings.Contains(out, "database proxy: the requests of 10 of 10 bursts met at its hold point") ||
		!strings.Contains(out, "2 requests each ran `SELECT count(*) FROM "+table+" WHERE code = $1` before any ran `INSERT INTO "+table+" (code) VALUES ($1)`") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	out, _, _ = execCmd(t, false, append(args, "-o", "json")...)
	var doc struct {
		Runs []struct {
			Violations int `json:"violations"`
			PerBurst   []struct {
				Hold *struct {
					Met   int `json:"met"`
					Conns []struct {
						Transactions [][]struct {
							Text string `json:"text"`
							Held bool   `json:"held"`
						} `json:"transactions"`
					} `json:"conns"`
				} `json:"hold"`
			} `json:"per_burst"`
		} `json:"runs"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc.Runs) != 1 {
		t.Fatalf("JSON: %v\n%s", err, out)
	}
	r := doc.Runs[0]
	if r.Violations != 10 || len(r.PerBurst) != 10 {
		t.Fatalf("JSON: %d violations in %d bursts, want 10 of 10", r.Violations, len(r.PerBurst))
	}
	for i, b := range r.PerBurst {
		if b.Hold == nil || b.Hold.Met != 2 || len(b.Hold.Conns) != 2 {
			t.Fatalf("burst %d: hold %+v, want 2 met on 2 connections", i, b.Hold)
		}
	}
	// The HTML page shows each connection's statements of the raced burst.
	out, _, _ = execCmd(t, false, append(args, "-o", "html")...)
	if !strings.Contains(out, "connection 1: [SELECT count(*) FROM "+table) || !strings.Contains(out, "(held)]") {
		t.Errorf("the HTML report has no trace of the raced burst")
	}
	// An address where no racetest proxy answers: the test server itself.
	_, errOut, code = execCmd(t, false, "http", "POST", srv.URL+"/redeem?code={{.Token}}", "-n", "2", "--bursts", "1",
		"--proxy", strings.TrimPrefix(srv.URL, "http://"))
	if code != exitUsage || !strings.Contains(errOut, "racetest proxy --upstream") {
		t.Errorf("--proxy at a server that is no proxy: exit %d, stderr %q; want 2 and how to start one", code, errOut)
	}
}
