package httpfire_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/racetest/racetest/httpfire"
	"github.com/racetest/racetest/httpfire/httpfiretest"
	"github.com/racetest/racetest/internal/sqldb"
	"github.com/racetest/racetest/internal/testenv"
	"github.com/racetest/racetest/report"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
)

// A service whose guard is a row lock in the database answers a burst one
// request at a time: each waits for the one before it to commit. That is
// the fix working, and must not read like a server with one worker
// (INCONCLUSIVE): while the burst is in flight a session of the database
// waits on a lock, and racetest, watching the database its checks read,
// counts the burst as tested. The same service serialized by a mutex in
// its process (a guard that holds with one replica only) shows no such
// wait and stays INCONCLUSIVE; without the lock it races.
func TestLockInTheDatabaseIsNotOneWorker(t *testing.T) {
	for _, store := range []string{"postgres", "mysql"} {
		t.Run(store, func(t *testing.T) {
			svc := newTransferService(t, store)
			for _, c := range []struct {
				variant string
				want    report.Verdict
			}{
				{"for-update", report.Safe},
				// Serialized in the process: INCONCLUSIVE, or, where load
				// blurs the response times of enough bursts into
				// concurrent-looking ones, SAFE by those (the estimate's
				// limit, docs/http.md); never by a lock wait.
				{"mutex", report.Inconclusive},
				{"naive", report.Race},
			} {
				t.Run(c.variant, func(t *testing.T) {
					if c.variant == "mutex" {
						// Another client's lock waits, on a table of the same
						// database that no check reads, all through the run:
						// they are not the service's.
						svc.noise(t)
					}
					res, target := svc.run(t, c.variant)
					a := report.Assess(report.Case{Expect: report.Expect{Kind: report.ExpectSafe}, Result: res})
					notes := strings.Join(target.Notes(), "\n")
					if c.variant == "mutex" && a.Verdict == report.Safe {
						c.want = report.Safe
					}
					if a.Verdict != c.want {
						t.Fatalf("%s: %s (%s), want %s\nnotes:\n%s", c.variant, a.Verdict, a.Why, c.want, notes)
					}
					switch c.variant {
					case "for-update":
						// Answered one at a time (the lock queues them), yet tested.
						if res.LockSerialized() == 0 || res.Serial() != 0 {
							t.Errorf("for-update: %d bursts queued by the lock, %d served one at a time: want some, and none", res.LockSerialized(), res.Serial())
						}
						if !strings.Contains(notes, "lock waits on ") || !strings.Contains(notes, "a session waited on a lock in") {
							t.Errorf("the notes do not say what the watch saw:\n%s", notes)
						}
					case "mutex":
						for _, b := range res.Bursts {
							if b.LockWaited {
								t.Errorf("mutex: burst %d waited on a lock in the database, where nothing locks", b.Index)
							}
						}
					}
				})
			}
		})
	}
}

// transferService moves 10 out of a balance of 100 per request, in a
// transaction with a pause between its read and its write (the work a real
// handler does there): "for-update" reads with SELECT … FOR UPDATE,
// "naive" with a plain SELECT (two requests overwrite each other's
// write), "mutex" plainly too, one request at a time in this process.
type transferService struct {
	store, url string
	p          scenarios.Params
	db         *sql.DB
	acct, log  string
}

// transferWork is the pause between a transfer's read and its write.
// Long beside the round trips, so that requests queued one behind another
// read as answered one at a time even on a loaded machine.
const transferWork = 50 * time.Millisecond

func newTransferService(t *testing.T, store string) *transferService {
	t.Helper()
	p := params()
	s := &transferService{store: store, acct: p.Prefix() + "acct", log: p.Prefix() + "moves"}
	var err error
	switch store {
	case "postgres":
		s.url = testenv.URL("postgres")
		p.Conn.Set("postgres", s.url)
		s.db, err = sql.Open("pgx", s.url)
	default:
		dsn := testenv.Conn("mysql")
		p.Conn.Set("mysql", dsn)
		var cfg *mysql.Config
		if cfg, err = sqldb.MySQLConfig(dsn); err == nil {
			var conn driver.Connector
			if conn, err = mysql.NewConnector(cfg); err == nil {
				s.db = sql.OpenDB(conn)
			}
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	s.p = p
	t.Cleanup(func() { s.db.Close() }) // after the tables are dropped
	ctx := context.Background()
	if err := s.db.PingContext(ctx); err != nil {
		testenv.Unavailable(t, store, err)
	}
	for _, q := range []string{
		"CREATE TABLE " + s.acct + " (k VARCHAR(64) PRIMARY KEY, balance INT NOT NULL)",
		"CREATE TABLE " + s.log + " (k VARCHAR(64) NOT NULL, amount INT NOT NULL)",
	} {
		if _, err := s.db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, table := range []string{s.acct, s.log} {
			if _, err := s.db.ExecContext(context.Background(), "DROP TABLE "+table); err != nil {
				t.Errorf("dropping %s: %v", table, err)
			}
		}
	})
	s.db.SetMaxOpenConns(16)
	return s
}

// ph is the store's i-th placeholder.
func (s *transferService) ph(i int) string {
	if s.store == "postgres" {
		return fmt.Sprintf("$%d", i)
	}
	return "?"
}

// run fires 8 bursts of 4 transfers at variant, judged by the invariant that
// the balance is 100 less 10 per recorded move.
func (s *transferService) run(t *testing.T, variant string) (*runner.Result, *httpfire.Target) {
	t.Helper()
	var mu sync.Mutex
	srv := newServer(t, plainH1, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		k := r.URL.Query().Get("k")
		if r.URL.Path == "/setup" {
			if _, err := s.db.ExecContext(r.Context(), "INSERT INTO "+s.acct+" (k, balance) VALUES ("+s.ph(1)+", 100)", k); err != nil {
				http.Error(w, err.Error(), 500)
			}
			return
		}
		if variant == "mutex" {
			mu.Lock()
			defer mu.Unlock()
		}
		if err := s.transfer(r.Context(), k, variant == "for-update"); err != nil {
			http.Error(w, err.Error(), 500)
		}
	}))
	inv := fmt.Sprintf("sql:%s:SELECT count(*) FROM %s a WHERE a.k = '{{.Token}}' AND a.balance <> 100 - (SELECT COALESCE(SUM(m.amount), 0) FROM %s m WHERE m.k = a.k)",
		s.store, s.acct, s.log)
	target, err := httpfire.New(httpfire.Config{
		Method: "POST", URL: srv.URL + "/move?k={{.Token}}", Setup: "POST " + srv.URL + "/setup?k={{.Token}}",
		Invariants: []string{inv}, Release: httpfire.LastByte,
	}, s.p)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := runner.Run(ctx, target, runner.Attempts(4), runner.Bursts(8), runner.Timeout(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return res, target
}

// transfer moves 10 out of k's balance: read, work, write the read value
// less 10, and record the move.
func (s *transferService) transfer(ctx context.Context, k string, lock bool) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	q := "SELECT balance FROM " + s.acct + " WHERE k = " + s.ph(1)
	if lock {
		q += " FOR UPDATE"
	}
	var balance int
	if err := tx.QueryRowContext(ctx, q, k).Scan(&balance); err != nil {
		return err
	}
	httpfiretest.Wait(transferWork)
	if _, err := tx.ExecContext(ctx, "UPDATE "+s.acct+" SET balance = "+s.ph(1)+" WHERE k = "+s.ph(2), balance-10, k); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO "+s.log+" (k, amount) VALUES ("+s.ph(1)+", 10)", k); err != nil {
		return err
	}
	return tx.Commit()
}

// noise makes lock waits on a table of its own in the service's database
// until the test ends: one session holds a row with FOR UPDATE for a few
// milliseconds at a time while another waits for it.
func (s *transferService) noise(t *testing.T) {
	t.Helper()
	table := s.acct + "_noise"
	if _, err := s.db.Exec("CREATE TABLE " + table + " (k INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.Exec("INSERT INTO " + table + " (k) VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		if _, err := s.db.Exec("DROP TABLE " + table); err != nil {
			t.Errorf("dropping %s: %v", table, err)
		}
	})
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				tx, err := s.db.BeginTx(ctx, nil)
				if err != nil {
					return
				}
				var k int
				if err := tx.QueryRowContext(ctx, "SELECT k FROM "+table+" WHERE k = 1 FOR UPDATE").Scan(&k); err == nil {
					httpfiretest.Wait(5 * time.Millisecond)
				}
				tx.Rollback()
			}
		}()
	}
}
