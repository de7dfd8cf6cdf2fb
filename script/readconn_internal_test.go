package script

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/racetest/racetest/internal/mongodb"
	"github.com/racetest/racetest/internal/redisdb"
	"github.com/racetest/racetest/internal/sqldb"
	"github.com/racetest/racetest/runner"
)

// answerConn answers every statement with err, and counts what it was sent.
type answerConn struct {
	err  error
	sent []string
}

func (f *answerConn) Exec(_ context.Context, st Stmt) (Reply, error) {
	f.sent = append(f.sent, st.Text)
	return Reply{}, f.err
}
func (f *answerConn) Classify(error) (runner.Class, bool) { return runner.Error, false }
func (f *answerConn) Rollback(context.Context) error      { return nil }

// A check's connection refuses, before sending it, a statement its rule
// refuses; sends one of no text (a command written whole) and any when it
// has no rule; and reads the server's refusal in a read-only transaction
// as a write, any other error as itself.
func TestReadConnRefusesAndReads(t *testing.T) {
	ctx := context.Background()
	refuse := func(text string) error {
		if text == "DELETE FROM t" {
			return &sqldb.WriteError{Statement: "DELETE"}
		}
		return nil
	}
	var we *sqldb.WriteError
	f := &answerConn{}
	if _, err := (readConn{Conn: f, refuse: refuse}).Exec(ctx, Stmt{Text: "DELETE FROM t"}); !errors.As(err, &we) || len(f.sent) != 0 {
		t.Errorf("a refused statement: %v, sent %q; want refused, unsent", err, f.sent)
	}
	if _, err := (readConn{Conn: f, refuse: refuse}).Exec(ctx, Stmt{}); err != nil || len(f.sent) != 1 {
		t.Errorf("a statement of no text: %v, sent %q; want it sent", err, f.sent)
	}
	if _, err := (readConn{Conn: f}).Exec(ctx, Stmt{Text: "DELETE FROM t"}); err != nil || len(f.sent) != 2 {
		t.Errorf("no rule: %v, sent %q; want it sent", err, f.sent)
	}
	ro := &pgconn.PgError{Code: sqldb.CodeReadOnlyTransaction, Message: "cannot execute DELETE in a read-only transaction"}
	if _, err := (readConn{Conn: &answerConn{err: ro}}).Exec(ctx, Stmt{Text: "SELECT f()"}); !errors.As(err, &we) || we.Err != ro {
		t.Errorf("the server's refusal: %v, want a WriteError wrapping it", err)
	}
	other := errors.New("connection reset")
	if _, err := (readConn{Conn: &answerConn{err: other}}).Exec(ctx, Stmt{Text: "SELECT 1"}); err != other {
		t.Errorf("another error: %v, want it as it was", err)
	}
}

// A run's errors name its first repetition as its Unit says.
func TestFirstUnit(t *testing.T) {
	if got := (&Target{}).firstUnit(); got != "the first burst" {
		t.Errorf("no unit: %q", got)
	}
	if got := (&Target{Unit: "order"}).firstUnit(); got != "the first order" {
		t.Errorf("unit order: %q", got)
	}
}

// A check refused for writing is so on every store.
func TestIsWriteRefused(t *testing.T) {
	for _, err := range []error{&sqldb.WriteError{Statement: "DELETE"}, &redisdb.WriteError{}, &mongodb.WriteError{}} {
		if !isWriteRefused(fmt.Errorf("--effects: %w", err)) {
			t.Errorf("%T: not read as a refused write", err)
		}
	}
	if isWriteRefused(errors.New("connection reset")) {
		t.Error("another error read as a refused write")
	}
}
