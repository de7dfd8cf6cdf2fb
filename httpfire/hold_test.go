package httpfire_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/racetest/racetest/httpfire"
	"github.com/racetest/racetest/internal/sqldb"
	"github.com/racetest/racetest/internal/testenv"
	"github.com/racetest/racetest/proxy"
	"github.com/racetest/racetest/report"
	"github.com/racetest/racetest/runner"
)

// Through a racetest proxy, a check-then-write endpoint races in every
// burst, not in the bursts whose timing happens to open the window: each
// request's INSERT is held until both requests have run their SELECT. The
// same endpoint behind a unique index reads SAFE, each burst's requests
// met at the hold point; a service that does not use the proxy reads
// INCONCLUSIVE, saying so.
func TestProxyForcesTheRace(t *testing.T) {
	for _, store := range []string{"postgres", "mysql"} {
		t.Run(store, func(t *testing.T) {
			svc := newRedeemService(t, store)
			for _, c := range []struct {
				variant string
				direct  bool // the service bypasses the proxy
				want    report.Verdict
			}{
				{"naive", false, report.Race},
				{"unique", false, report.Safe},
				// A race seen without the proxy is still a race; a fix seen
				// without it proves nothing.
				{"naive", true, report.Race},
				{"unique", true, report.Inconclusive},
			} {
				name := c.variant
				if c.direct {
					name += "-bypassing-the-proxy"
				}
				t.Run(name, func(t *testing.T) {
					res := svc.run(t, c.variant, c.direct)
					a := report.Assess(report.Case{Expect: report.Expect{Kind: report.ExpectSafe}, Result: res})
					if a.Verdict != c.want {
						t.Fatalf("%s: %s (%s), want %s", name, a.Verdict, a.Why, c.want)
					}
					met := 0
					for _, b := range res.Bursts {
						if b.Hold == nil {
							t.Fatalf("burst %d has no account from the proxy", b.Index)
						}
						if !b.Hold.Untested {
							met++
						}
					}
					switch {
					case c.direct && c.variant == "naive":
					case c.direct:
						if met != 0 || !strings.Contains(a.Why, "never met at the database proxy's hold point") || !strings.Contains(a.Why, "no statement reached the proxy") {
							t.Errorf("bypassing the proxy: %d bursts met; why %q", met, a.Why)
						}
					case c.variant == "naive":
						// Every burst, not most of them.
						if res.Violations() != len(res.Bursts) || met != len(res.Bursts) {
							t.Errorf("naive: %d of %d bursts violated, %d met at the hold point: want every one", res.Violations(), len(res.Bursts), met)
						}
						var lines []string
						lines = append(lines, report.HoldStory(res.Bursts[0].Hold))
						if testing.Verbose() {
							t.Logf("%+v", res.Bursts[0].Hold)
						}
						if !strings.Contains(lines[0], "2 requests each ran `SELECT count(*) FROM "+svc.table+" WHERE k = ") || !strings.Contains(lines[0], "before any ran `INSERT INTO "+svc.table) {
							t.Errorf("the story of a raced burst: %q", lines[0])
						}
					default:
						if met != len(res.Bursts) {
							t.Errorf("unique: %d of %d bursts met at the hold point: want every one", met, len(res.Bursts))
						}
					}
				})
			}
		})
	}
}

// redeemService redeems a token once: SELECT, then INSERT when it found
// nothing, each in autocommit, on a pool through the proxy. Its table has
// a unique index on k in the "unique" variant, none in "naive".
type redeemService struct {
	store, table, uniq string
	direct, viaProxy   *sql.DB
	p                  *proxy.Proxy
	conn               string // the checks' connection (direct)
}

func newRedeemService(t *testing.T, store string) *redeemService {
	t.Helper()
	s := &redeemService{store: store}
	var upstream, driver string
	switch store {
	case "postgres":
		upstream, driver = testenv.URL("postgres"), "pgx"
		s.conn = upstream
	default:
		upstream, driver = testenv.URL("mysql"), "mysql"
		s.conn = upstream
	}
	p, err := proxy.Start(context.Background(), proxy.Config{Upstream: upstream})
	var ue *proxy.UpstreamError
	if errors.As(err, &ue) {
		testenv.Unavailable(t, store, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	s.p = p
	open := func(dsn string) *sql.DB {
		if store == "mysql" {
			cfg, err := sqldb.MySQLConfig(dsn)
			if err != nil {
				t.Fatal(err)
			}
			cfg.InterpolateParams = false
			dsn = cfg.FormatDSN()
		}
		db, err := sql.Open(driver, dsn)
		if err != nil {
			t.Fatal(err)
		}
		db.SetMaxOpenConns(8)
		db.SetMaxIdleConns(8)
		return db
	}
	s.direct, s.viaProxy = open(upstream), open(p.ServiceURL())
	t.Cleanup(func() { s.direct.Close(); s.viaProxy.Close() })
	if err := s.direct.Ping(); err != nil {
		testenv.Unavailable(t, store, err)
	}
	var b [4]byte
	rand.Read(b[:])
	s.table = "racetest_hold_" + hex.EncodeToString(b[:])
	s.uniq = s.table + "_u"
	for _, tb := range []string{s.table, s.uniq} {
		q := "CREATE TABLE " + tb + " (k VARCHAR(64) NOT NULL)"
		if tb == s.uniq {
			q = "CREATE TABLE " + tb + " (k VARCHAR(64) NOT NULL UNIQUE)"
		}
		if _, err := s.direct.Exec(q); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if _, err := s.direct.Exec("DROP TABLE " + tb); err != nil {
				t.Errorf("dropping %s: %v", tb, err)
			}
		})
	}
	return s
}

func (s *redeemService) ph() string {
	if s.store == "postgres" {
		return "$1"
	}
	return "?"
}

// run fires 20 bursts of 2 at variant through the proxy (direct: the
// service bypasses it), counting the redemptions in the store.
func (s *redeemService) run(t *testing.T, variant string, direct bool) *runner.Result {
	t.Helper()
	table := s.table
	if variant == "unique" {
		table = s.uniq
	}
	db := s.viaProxy
	if direct {
		db = s.direct
	}
	srv := newServer(t, plainH1, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		k := r.URL.Query().Get("k")
		var n int
		if err := db.QueryRowContext(r.Context(), "SELECT count(*) FROM "+table+" WHERE k = "+s.ph(), k).Scan(&n); err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		if n > 0 {
			http.Error(w, "already redeemed", http.StatusConflict)
			return
		}
		if _, err := db.ExecContext(r.Context(), "INSERT INTO "+table+" (k) VALUES ("+s.ph()+")", k); err != nil {
			// The unique index refused the second: already redeemed.
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		fmt.Fprintln(w, "redeemed")
	}))
	p := params()
	p.Conn.Set(s.store, s.conn)
	target, err := httpfire.New(httpfire.Config{
		Method: "POST", URL: srv.URL + "/redeem?k={{.Token}}", Release: httpfire.LastByte,
		Effects: "sql:" + s.store + ":SELECT count(*) FROM " + table + " WHERE k = '{{.Token}}'",
		Proxy:   s.p.ControlAddr(),
	}, p)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := runner.Run(ctx, target, runner.Attempts(2), runner.Bursts(20), runner.Timeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// A --proxy address where no racetest proxy answers is bad input, said
// before anything is sent.
func TestProxyAddressThatIsNoProxy(t *testing.T) {
	other := newServer(t, plainH1, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "hello") }))
	target, err := httpfire.New(httpfire.Config{URL: other.URL, Proxy: strings.TrimPrefix(other.URL, "http://")}, params())
	if err != nil {
		t.Fatal(err)
	}
	_, err = runner.Run(context.Background(), target, runner.Attempts(2), runner.Bursts(1))
	var in *httpfire.InputError
	if !errors.As(err, &in) || in.Field != "proxy" || !strings.Contains(err.Error(), "racetest proxy --upstream") {
		t.Fatalf("err = %v, want an InputError on proxy naming racetest proxy", err)
	}
}

// A proxy's control address where nothing answers is bad input, saying how
// to start one, before anything is sent.
func TestProxyUnreachable(t *testing.T) {
	srv := newServer(t, plainH1, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	target, err := httpfire.New(httpfire.Config{URL: srv.URL, Proxy: "127.0.0.1:1"}, params())
	if err != nil {
		t.Fatal(err)
	}
	_, err = runner.Run(context.Background(), target, runner.Attempts(2), runner.Bursts(1))
	var in *httpfire.InputError
	if !errors.As(err, &in) || in.Field != "proxy" || !strings.Contains(err.Error(), "connection refused") || !strings.Contains(err.Error(), "racetest proxy --upstream") {
		t.Fatalf("err = %v, want an InputError on proxy: refused, and how to start one", err)
	}
}

// A request that finishes without writing is reported to the proxy, which
// then lets the other's held write go at once ("others finished") rather
// than at the hold's timeout.
func TestProxyHearsEachAnswer(t *testing.T) {
	svc := newRedeemService(t, "postgres")
	srv := newServer(t, plainH1, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if r.URL.Query().Get("attempt") == "1" {
			http.Error(w, "not this one", http.StatusConflict)
			return
		}
		if _, err := svc.viaProxy.ExecContext(r.Context(), "INSERT INTO "+svc.table+" (k) VALUES ($1)", r.URL.Query().Get("k")); err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		fmt.Fprintln(w, "done")
	}))
	p := params()
	p.Conn.Set("postgres", svc.conn)
	target, err := httpfire.New(httpfire.Config{
		Method: "POST", URL: srv.URL + "/?k={{.Token}}&attempt={{.Attempt}}", Release: httpfire.LastByte, Proxy: svc.p.ControlAddr(),
		Effects: "sql:postgres:SELECT count(*) FROM " + svc.table + " WHERE k = '{{.Token}}'", Timeout: 20 * time.Second,
	}, p)
	if err != nil {
		t.Fatal(err)
	}
	res, err := runner.Run(context.Background(), target, runner.Attempts(2), runner.Bursts(3), runner.Timeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range res.Bursts {
		if b.Hold == nil || !strings.Contains(b.Hold.Summary, "(others finished)") {
			t.Errorf("burst %d: %+v, want its write let go when the other request was answered", b.Index, b.Hold)
		}
	}
}
