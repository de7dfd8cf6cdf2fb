package race

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/racetest/racetest/internal/testenv"
	"github.com/racetest/racetest/runner"
)

// autoCase is caseFor with no effects count: a Watcher reads the store's
// redemptions as a table would show them.
func (c *coupons) autoCase(redeem func(*Worker, string) error) Case {
	k := c.caseFor(redeem)
	k.Effects = nil
	k.Auto = func(context.Context) (runner.Snapshot, error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		n := 0
		for _, e := range c.effects {
			n += e
		}
		return runner.Snapshot{"redemptions rows": big.NewRat(int64(n), 1)}, nil
	}
	return k
}

func TestAutoFindsTheRaceWithoutAnEffectsCount(t *testing.T) {
	setShort(t, false)
	c := newCoupons()
	f := newFakeT(t)
	rep := call(f, ExpectRace, c.autoCase(c.naive))
	if f.failed() {
		t.Fatalf("ExpectRace failed on the naive redeem:\n%s", f.errText())
	}
	wantIn(t, "the report", rep.String(), "`redemptions`: +1 row")
	if rep.Result.Twins == nil || rep.Result.Twins.Solos != 40 {
		t.Errorf("solo twins: %+v", rep.Result.Twins)
	}
	c = newCoupons()
	f = newFakeT(t)
	call(f, Test, c.autoCase(c.fixed))
	if f.failed() {
		t.Fatalf("Test failed on the fixed redeem:\n%s", f.errText())
	}
	k := c.autoCase(c.fixed)
	k.SoloEvery = 4
	rep, err := Run(t.Context(), k)
	if err != nil || rep.Result.Twins.Solos != 10 {
		t.Fatalf("SoloEvery 4 of 40 bursts: %v, %+v", err, rep.Result.Twins)
	}
}

func TestAutoOrEffects(t *testing.T) {
	c := newCoupons()
	k := c.autoCase(c.fixed)
	k.Effects = c.caseFor(c.fixed).Effects
	if _, err := Run(t.Context(), k); err == nil || !strings.Contains(err.Error(), "Effects and Auto contradict each other") {
		t.Errorf("both: %v", err)
	}
	k.Auto, k.Effects = nil, nil
	if _, err := Run(t.Context(), k); err == nil || !strings.Contains(err.Error(), "Effects (or Invariant, or Auto) must be set") {
		t.Errorf("neither: %v", err)
	}
	k = c.autoCase(c.fixed)
	k.SoloEvery = -1
	if _, err := Run(t.Context(), k); err == nil || !strings.Contains(err.Error(), "SoloEvery cannot be negative") {
		t.Errorf("SoloEvery -1: %v", err)
	}
}

// race.Auto on a team's own *sql.DB (MySQL/MariaDB through its driver):
// the naive redeem differs from its solo twins in the redemptions table,
// the conditional one does not.
func TestAutoOnMySQL(t *testing.T) {
	cfg, err := mysql.ParseDSN(testenv.URL("mysql"))
	if err != nil {
		t.Fatal(err)
	}
	conn, _ := mysql.NewConnector(cfg)
	db := sql.OpenDB(conn)
	defer db.Close()
	ctx := t.Context()
	if err := db.PingContext(ctx); err != nil {
		testenv.Unavailable(t, "mysql", err)
	}
	b := make([]byte, 4)
	rand.Read(b)
	coupons, redemptions := "racetest_"+hex.EncodeToString(b)+"_coupons", "racetest_"+hex.EncodeToString(b)+"_redemptions"
	for _, q := range []string{"CREATE TABLE " + coupons + " (code VARCHAR(64) PRIMARY KEY, used INT NOT NULL DEFAULT 0)",
		"CREATE TABLE " + redemptions + " (code VARCHAR(64) NOT NULL)"} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		for _, tb := range []string{coupons, redemptions} {
			if _, err := db.ExecContext(context.Background(), "DROP TABLE "+tb); err != nil {
				t.Errorf("drop %s by hand: %v", tb, err)
			}
		}
	}()
	db.SetMaxOpenConns(10)
	k := func(naive bool) Case {
		return Case{
			Attempts: 6, Bursts: 10, Auto: Auto(db, coupons, redemptions),
			Subject: func(ctx context.Context, b Burst) (any, error) {
				_, err := db.ExecContext(ctx, "INSERT INTO "+coupons+" (code) VALUES (?)", b.Token())
				return b.Token(), err
			},
			Session: func(ctx context.Context, _ int) (any, error) { return db.Conn(ctx) },
			Attempt: func(ctx context.Context, s any, w *Worker) Outcome {
				c := w.Session.(*sql.Conn)
				tx, err := c.BeginTx(ctx, nil)
				if err != nil {
					return From(err)
				}
				defer tx.Rollback()
				if naive {
					var used int
					w.Step("check")
					if err := tx.QueryRowContext(ctx, "SELECT used FROM "+coupons+" WHERE code = ?", s).Scan(&used); err != nil {
						return From(err)
					}
					if used != 0 {
						return From(ErrDeclined)
					}
					time.Sleep(time.Millisecond)
					w.Step("act")
					if _, err := tx.ExecContext(ctx, "UPDATE "+coupons+" SET used = 1 WHERE code = ?", s); err != nil {
						return From(err)
					}
				} else {
					w.Step("act")
					r, err := tx.ExecContext(ctx, "UPDATE "+coupons+" SET used = 1 WHERE code = ? AND used = 0", s)
					if err != nil {
						return From(err)
					}
					if n, _ := r.RowsAffected(); n == 0 {
						return From(ErrDeclined)
					}
				}
				if _, err := tx.ExecContext(ctx, "INSERT INTO "+redemptions+" (code) VALUES (?)", s); err != nil {
					return From(err)
				}
				return From(tx.Commit())
			},
		}
	}
	rep := ExpectRace(t, k(true))
	wantIn(t, "the naive report", rep.String(), "`"+redemptions+"`: +1")
	Test(t, k(false))
}

// An Auto case is judged by its snapshots, not by its invariant alone.
func TestAutoCaseIsCounted(t *testing.T) {
	c := newCoupons()
	if (&target{c: func() *Case { k := c.autoCase(c.fixed); return &k }()}).Uncounted() {
		t.Error("an Auto case is Uncounted")
	}
	if !(&target{c: &Case{}}).Uncounted() {
		t.Error("a case with neither Effects nor Auto is not Uncounted")
	}
}
