package proxy

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// A tiny service of the kind a team writes: redeem a coupon once per
// user. Each variant is one way to write it; the naive ones check and
// then write, and the race between the check and the write is what the
// proxy must force on every burst.
type variant struct {
	name string
	// setup makes the tables ("%t" is the redemptions table, "%c" the
	// coupons table).
	setup []string
	// redeem is one request, on a connection of the pool.
	redeem func(ctx context.Context, s server, c *sql.Conn, tb, coupons string, user int) error
	// race: the naive variants leave two rows every burst; the fixes one.
	race bool
	// held is the statement each connection must have held.
	held string
	// explicit: the held statement runs in a BEGIN … COMMIT, after the
	// check, as the account's transactions must show.
	explicit bool
}

func checkThenInsert(ctx context.Context, s server, q querier, tb string, user int) error {
	var n int
	if err := q.QueryRowContext(ctx, s.bind("SELECT count(*) FROM "+tb+" WHERE user_id = $1"), user).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return nil
	}
	_, err := q.ExecContext(ctx, s.bind("INSERT INTO "+tb+" (user_id) VALUES ($1)"), user)
	return err
}

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

func inTx(ctx context.Context, c *sql.Conn, f func(tx *sql.Tx) error) error {
	tx, err := c.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return err
	}
	if err := f(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// isDuplicate: the unique index refused the second row.
func isDuplicate(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "23505") || strings.Contains(err.Error(), "1062"))
}

var variants = []variant{
	{
		name: "check-then-insert", race: true, held: "INSERT INTO %t (user_id) VALUES ($1)",
		redeem: func(ctx context.Context, s server, c *sql.Conn, tb, _ string, user int) error {
			return checkThenInsert(ctx, s, c, tb, user)
		},
	},
	{
		name: "check-then-insert in a transaction", race: true, explicit: true, held: "INSERT INTO %t (user_id) VALUES ($1)",
		redeem: func(ctx context.Context, s server, c *sql.Conn, tb, _ string, user int) error {
			return inTx(ctx, c, func(tx *sql.Tx) error { return checkThenInsert(ctx, s, tx, tb, user) })
		},
	},
	{
		name: "unique index", held: "INSERT INTO %t (user_id) VALUES ($1)",
		setup: []string{"CREATE UNIQUE INDEX %t_one ON %t (user_id)"},
		redeem: func(ctx context.Context, s server, c *sql.Conn, tb, _ string, user int) error {
			err := checkThenInsert(ctx, s, c, tb, user)
			if isDuplicate(err) {
				return nil // already redeemed: the index said so
			}
			return err
		},
	},
	{
		name: "conditional update", held: "UPDATE %c SET used = $2 WHERE user_id = $1 AND used = $3",
		redeem: func(ctx context.Context, s server, c *sql.Conn, tb, coupons string, user int) error {
			var n int
			if err := c.QueryRowContext(ctx, s.bind("SELECT count(*) FROM "+coupons+" WHERE user_id = $1 AND used = 0"), user).Scan(&n); err != nil || n == 0 {
				return err
			}
			res, err := c.ExecContext(ctx, s.bind("UPDATE "+coupons+" SET used = 1 WHERE user_id = $1 AND used = 0"), user)
			if err != nil {
				return err
			}
			if k, _ := res.RowsAffected(); k != 1 {
				return nil // someone else took it
			}
			_, err = c.ExecContext(ctx, s.bind("INSERT INTO "+tb+" (user_id) VALUES ($1)"), user)
			return err
		},
	},
	{
		name: "select for update", explicit: true, held: "SELECT used FROM %c WHERE user_id = $1 FOR UPDATE",
		redeem: func(ctx context.Context, s server, c *sql.Conn, tb, coupons string, user int) error {
			return inTx(ctx, c, func(tx *sql.Tx) error {
				var used int
				if err := tx.QueryRowContext(ctx, s.bind("SELECT used FROM "+coupons+" WHERE user_id = $1 FOR UPDATE"), user).Scan(&used); err != nil {
					return err
				}
				return checkThenInsert(ctx, s, tx, tb, user)
			})
		},
	},
}

// THE test: through the proxy, with a burst of two begun around two
// requests, every naive check-then-write redeems twice, and every fix
// once, on every one of 20 bursts; and the account says both requests
// met at the write (or the lock) and were released together.
func TestBurstForcesTheRace(t *testing.T) {
	const bursts = 20
	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) {
			f := start(t, srv, Config{})
			for vi, v := range variants {
				t.Run(v.name, func(t *testing.T) {
					tb := f.table(fmt.Sprintf("r%d", vi), "(user_id INT NOT NULL)", v.setup...)
					coupons := f.table(fmt.Sprintf("c%d", vi), "(user_id INT PRIMARY KEY, used INT NOT NULL)")
					db := f.open(4)
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
					defer cancel()
					raced := 0
					for burst := range bursts {
						user := burst + 1
						if _, err := f.direct.Exec(srv.bind("INSERT INTO "+coupons+" VALUES ($1, 0)"), user); err != nil {
							t.Fatal(err)
						}
						// Each request has its own connection of the pool,
						// taken before the burst (a warm pool).
						conns := make([]*sql.Conn, 2)
						for i := range conns {
							c, err := db.Conn(ctx)
							if err != nil {
								t.Fatal(err)
							}
							conns[i] = c
						}
						// The requests report when they have their answers, as
						// racetest's engine does: no guess from quiet connections.
						id, err := f.p.Begin(BurstSpec{Attempts: 2, Timeout: 60 * time.Second, Reports: true})
						if err != nil {
							t.Fatal(err)
						}
						var wg sync.WaitGroup
						errs := make([]error, 2)
						for i, c := range conns {
							wg.Go(func() {
								errs[i] = v.redeem(ctx, srv, c, tb, coupons, user)
								f.p.Done(id)
							})
						}
						wg.Wait()
						a, err := f.p.End(id)
						if err != nil {
							t.Fatal(err)
						}
						for i, c := range conns {
							c.Close()
							if errs[i] != nil && !isDeadlock(errs[i]) {
								t.Fatalf("burst %d, request %d: %v", burst, i, errs[i])
							}
						}
						rows := f.count("SELECT count(*) FROM "+tb+" WHERE user_id = $1", user)
						if rows == 2 {
							raced++
						}
						want := 1
						if v.race {
							want = 2
						}
						if rows != want {
							t.Errorf("burst %d: %d rows, want %d\naccount: %s", burst, rows, want, accountText(a))
						}
						checkMet(t, burst, a, strings.NewReplacer("%t", tb, "%c", coupons).Replace(srv.bind(v.held)), v.explicit)
						if burst == 0 {
							t.Logf("the first burst's account:\n%s", accountText(a))
						}
					}
					t.Logf("%s on %s: %d of %d bursts redeemed twice", v.name, srv.name, raced, bursts)
				})
			}
		})
	}
}

// isDeadlock: MySQL's InnoDB may end one of two transactions that both
// hold a shared lock and want the exclusive one; the request failed,
// which is the database's answer, not the proxy's.
func isDeadlock(err error) bool {
	return strings.Contains(err.Error(), "1213") || strings.Contains(err.Error(), "40P01")
}

// checkMet: both connections held the statement held, together, for the
// reason "all met", and the burst counts as tested.
func checkMet(t *testing.T, burst int, a *Account, held string, explicit bool) {
	t.Helper()
	if a.Met != 2 || a.Held != 2 || a.Reason != ReleasedAllMet || a.Untested {
		t.Errorf("burst %d: met %d, held %d, reason %q, untested %v; want 2 met and held, all met, tested\naccount: %s", burst, a.Met, a.Held, a.Reason, a.Untested, accountText(a))
		return
	}
	heldSeen := 0
	for _, c := range a.Conns {
		if c.AtRelease != "held" {
			t.Errorf("burst %d: conn %d at release: %q, want held", burst, c.Conn, c.AtRelease)
		}
		if c.ServerID == 0 {
			t.Errorf("burst %d: conn %d has no server id", burst, c.Conn)
		}
		for _, tx := range c.Transactions {
			for i, s := range tx.Statements {
				if !s.Held {
					continue
				}
				heldSeen++
				if s.Text != held {
					t.Errorf("burst %d: held %q, want %q", burst, s.Text, held)
				}
				// In a transaction the held statement follows the
				// transaction's start; in autocommit it is alone.
				if tx.Explicit != explicit || explicit && i == 0 || !explicit && len(tx.Statements) != 1 {
					t.Errorf("burst %d: the held statement is statement %d of %d of a transaction with explicit %v; want explicit %v\naccount: %s", burst, i+1, len(tx.Statements), tx.Explicit, explicit, accountText(a))
				}
			}
		}
	}
	if heldSeen != 2 {
		t.Errorf("burst %d: %d statements marked held, want 2\naccount: %s", burst, heldSeen, accountText(a))
	}
}

func accountText(a *Account) string {
	var b strings.Builder
	b.WriteString(a.Summary())
	for _, c := range a.Conns {
		fmt.Fprintf(&b, "\n  conn %d (server %d, %s):", c.Conn, c.ServerID, c.AtRelease)
		for i, tx := range c.Transactions {
			fmt.Fprintf(&b, "\n    tx %d (explicit %v):", i+1, tx.Explicit)
			for _, s := range tx.Statements {
				mark := ""
				if s.Held {
					mark = " [held]"
				}
				fmt.Fprintf(&b, "\n      %s%s", s.Text, mark)
			}
		}
	}
	return b.String()
}
