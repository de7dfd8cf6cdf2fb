// Package redeem is a small coupon service, the kind a team ships: Redeem
// pays out a coupon once. Each store has a naive Redeem (read the coupon,
// and if it is unused, write) and a fixed one (one conditional write). Its
// tests (redeem_test.go) use racetest's race package to show the naive one
// paying twice under concurrent requests, and the fixed one safe.
//
// The scripts/ folder beside this file holds the same patterns as
// `racetest sql` and `racetest redis` scripts.
package redeem

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ErrAlreadyRedeemed is the deliberate "no": the coupon was used before.
var ErrAlreadyRedeemed = errors.New("coupon already redeemed")

// ErrNoCoupon: no coupon has that code.
var ErrNoCoupon = errors.New("no such coupon")

// Querier is what the SQL store needs of a database: a *sql.DB, or one
// *sql.Conn per request handler.
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}

// Dialect is the SQL server's flavour: the placeholders and the schema
// differ, the patterns do not.
type Dialect int

const (
	MySQL    Dialect = iota // MySQL and MariaDB (go-sql-driver/mysql)
	Postgres                // PostgreSQL (pgx through database/sql)
)

// Tables names the service's two tables; a prefix keeps a test's tables
// apart from everything else in the database.
type Tables struct {
	Coupons, Redemptions string
}

// TablesWithPrefix names the tables prefix_coupons and prefix_redemptions.
func TablesWithPrefix(prefix string) Tables {
	return Tables{Coupons: prefix + "_coupons", Redemptions: prefix + "_redemptions"}
}

// Schema is the statements that create the tables.
func Schema(d Dialect, t Tables) []string {
	id := "id BIGINT AUTO_INCREMENT PRIMARY KEY"
	engine := " ENGINE=InnoDB"
	if d == Postgres {
		id, engine = "id BIGSERIAL PRIMARY KEY", ""
	}
	return []string{
		fmt.Sprintf("CREATE TABLE %s (code VARCHAR(64) PRIMARY KEY, used INT NOT NULL DEFAULT 0)%s", t.Coupons, engine),
		fmt.Sprintf("CREATE TABLE %s (%s, code VARCHAR(64) NOT NULL)%s", t.Redemptions, id, engine),
	}
}

// Drop is the statements that drop the tables.
func Drop(t Tables) []string {
	return []string{"DROP TABLE IF EXISTS " + t.Redemptions, "DROP TABLE IF EXISTS " + t.Coupons}
}

// SQL is the service over a SQL database.
type SQL struct {
	DB      Querier
	Dialect Dialect
	Tables  Tables
	// Work is time spent between reading the coupon and writing the
	// redemption (a fraud check, a call to the payments API): the gap a
	// naive Redeem leaves open. Zero by default.
	Work time.Duration
}

// q rewrites ? placeholders as $1, $2… for PostgreSQL.
func (s *SQL) q(query string) string {
	if s.Dialect != Postgres {
		return query
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// NewCoupon adds an unused coupon.
func (s *SQL) NewCoupon(ctx context.Context, code string) error {
	_, err := s.DB.ExecContext(ctx, s.q("INSERT INTO "+s.Tables.Coupons+" (code) VALUES (?)"), code)
	if err != nil {
		return fmt.Errorf("new coupon %s: %w", code, err)
	}
	return nil
}

// Redemptions counts the redemptions of code: what was paid out.
func (s *SQL) Redemptions(ctx context.Context, code string) (int, error) {
	var n int
	err := s.DB.QueryRowContext(ctx, s.q("SELECT count(*) FROM "+s.Tables.Redemptions+" WHERE code = ?"), code).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count redemptions of %s: %w", code, err)
	}
	return n, nil
}

// Step is where a request is in Redeem; a test passes a function that
// marks it (race's w.Step), production passes nil.
type Step func(name string)

func (f Step) mark(name string) {
	if f != nil {
		f(name)
	}
}

// RedeemNaive reads the coupon and, if it is unused, marks it used and
// pays. Every statement is correct on its own; between the read and the
// write, another request reads "unused" too.
func (s *SQL) RedeemNaive(ctx context.Context, code string, step Step) error {
	step.mark("check")
	var used int
	err := s.DB.QueryRowContext(ctx, s.q("SELECT used FROM "+s.Tables.Coupons+" WHERE code = ?"), code).Scan(&used)
	if errors.Is(err, sql.ErrNoRows) {
		return ErrNoCoupon
	}
	if err != nil {
		return fmt.Errorf("read coupon %s: %w", code, err)
	}
	if used != 0 {
		return ErrAlreadyRedeemed
	}
	work(ctx, s.Work)
	step.mark("act")
	if _, err := s.DB.ExecContext(ctx, s.q("UPDATE "+s.Tables.Coupons+" SET used = 1 WHERE code = ?"), code); err != nil {
		return fmt.Errorf("mark coupon %s used: %w", code, err)
	}
	if _, err := s.DB.ExecContext(ctx, s.q("INSERT INTO "+s.Tables.Redemptions+" (code) VALUES (?)"), code); err != nil {
		return fmt.Errorf("pay coupon %s: %w", code, err)
	}
	return nil
}

// RedeemFixed marks the coupon used only if it is unused, in one
// statement, and pays only if that statement changed the row: the database
// decides, and it decides once. The payment is in the same transaction.
func (s *SQL) RedeemFixed(ctx context.Context, code string, step Step) (err error) {
	tx, err := s.DB.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("redeem %s: begin: %w", code, err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	work(ctx, s.Work)
	step.mark("act")
	res, err := tx.ExecContext(ctx, s.q("UPDATE "+s.Tables.Coupons+" SET used = 1 WHERE code = ? AND used = 0"), code)
	if err != nil {
		return fmt.Errorf("redeem %s: %w", code, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("redeem %s: rows affected: %w", code, err)
	}
	if n == 0 {
		return ErrAlreadyRedeemed
	}
	if _, err := tx.ExecContext(ctx, s.q("INSERT INTO "+s.Tables.Redemptions+" (code) VALUES (?)"), code); err != nil {
		return fmt.Errorf("pay coupon %s: %w", code, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("redeem %s: commit: %w", code, err)
	}
	return nil
}

func work(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
