package script

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/racetest/racetest/runner"
)

// rollbackConn records the context each rollback got.
type rollbackConn struct {
	fakeConn
	err      error
	deadline time.Duration
}

func (c *rollbackConn) Rollback(ctx context.Context) error {
	c.rollbacks++
	c.err = ctx.Err()
	if d, ok := ctx.Deadline(); ok {
		c.deadline = time.Until(d)
	}
	return nil
}

// An attempt that ends inside BEGIN is rolled back on a context of its
// own (its own may have run out, which is often why it ended), with a
// deadline of its own; one that ends outside a transaction rolls nothing
// back.
func TestRollbackOnlyInsideATransactionAndOnItsOwnTime(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	c := &rollbackConn{}
	c.answer = func(st Stmt) (Reply, error) {
		if strings.HasPrefix(st.Text, "SELECT") {
			cancel() // the attempt's time runs out during its query
			return Reply{}, context.Canceled
		}
		return Reply{Rows: 1}, nil
	}
	s := mustParse(t, "BEGIN;\nSELECT 1;\nCOMMIT;\n", SQL)
	s.Start(c, Data{}, nil).Run(ctx, nil)
	if c.rollbacks != 1 || c.err != nil || c.deadline <= time.Second || c.deadline > 2*time.Second {
		t.Fatalf("cut short inside BEGIN: %d rollbacks, on a context with err %v and %v left; want 1, live, with up to 2 s",
			c.rollbacks, c.err, c.deadline)
	}
	c = &rollbackConn{}
	mustParse(t, "SELECT 1;\n\\decline not this time\n", SQL).Start(c, Data{}, nil).Run(context.Background(), nil)
	if c.rollbacks != 0 {
		t.Fatalf("declined outside a transaction: %d rollbacks, want none", c.rollbacks)
	}
}

// QueryLast asks for the values of the last statement's reply, and of no
// other: the effects script's count is its last statement.
func TestQueryLastAsksForTheLastReplyOnly(t *testing.T) {
	for _, last := range []bool{false, true} {
		var queries []bool
		f := &fakeConn{answer: func(st Stmt) (Reply, error) {
			queries = append(queries, st.Query)
			return Reply{Columns: []string{"n"}, Values: []string{"2"}, Rows: 1}, nil
		}}
		e := mustParse(t, "SELECT 1;\nSELECT 2 AS n \\gset\nSELECT 3;\n", SQL).Start(f, Data{}, nil)
		if last {
			e.QueryLast()
		}
		e.Run(context.Background(), nil)
		if want := []bool{false, true, last}; len(queries) != 3 || queries[0] != want[0] || queries[1] != want[1] || queries[2] != want[2] {
			t.Errorf("QueryLast %v: queries %v, want %v (\\gset asks too)", last, queries, want)
		}
	}
}

// A statement is shown whole up to 80 characters, and cut to 79 and an
// ellipsis past that.
func TestOneLineCutsPast80Characters(t *testing.T) {
	s80 := strings.Repeat("é", 80)
	if got := oneLine(s80); got != s80 {
		t.Errorf("80 characters: %q", got)
	}
	if got := oneLine(s80 + "x"); got != strings.Repeat("é", 79)+"…" {
		t.Errorf("81 characters: %q", got)
	}
	if got := oneLine("SELECT\n  1,\t2"); got != "SELECT 1, 2" {
		t.Errorf("spaces: %q", got)
	}
}

// A script's own failure: its ScriptError, or a statement of its own
// making (a missing table, a syntax error: Schema); never a statement the
// server refused for another reason, nor an error that is neither.
func TestIsScriptErrorOnlyForTheScriptsOwn(t *testing.T) {
	for err, want := range map[error]bool{
		&ScriptError{}: true,
		&StatementError{Schema: true, Err: errors.New("no table")}: true,
		fmt.Errorf("wrapped: %w", &StatementError{Schema: true}):   true,
		&StatementError{Err: errors.New("deadlock")}:               false,
		errors.New("connection reset"):                             false,
	} {
		if got := IsScriptError(err); got != want {
			t.Errorf("IsScriptError(%v) = %v, want %v", err, got, want)
		}
	}
}

// A target needs an attempt script, and a way to judge it: an effects
// script, effects auto, or an invariant.
func TestNewNeedsAnAttemptAndAJudge(t *testing.T) {
	s := &Script{}
	for name, sc := range map[string]Scripts{
		"no attempt":                  {Effects: s},
		"no attempt, auto":            {Auto: true},
		"an attempt and nothing else": {Attempt: s},
	} {
		if _, err := New(nil, sc, "r"); err == nil || !strings.Contains(err.Error(), "an attempt script and an effects script") {
			t.Errorf("%s: %v, want it refused", name, err)
		}
	}
	// Each judge alone is enough beside an attempt (auto needs a store
	// that can snapshot: TestAutoChecksTheFirstBurst).
	for name, sc := range map[string]Scripts{
		"an attempt and an effects script": {Attempt: s, Effects: s},
		"an attempt and an invariant":      {Attempt: s, Invariants: []*Script{s}},
	} {
		if _, err := New(nil, sc, "r"); err != nil {
			t.Errorf("%s: %v, want it taken", name, err)
		}
	}
}

// The first burst stops the run only when every attempt failed on a
// statement (or one hit a ScriptError); one attempt failing among others
// that ran is the script working.
func TestCheckFirstOnlyWhenEveryAttemptFailed(t *testing.T) {
	failed := runner.Outcome{Class: runner.Error, Err: &StatementError{Schema: true, Err: errors.New("no table")}}
	for name, c := range map[string]struct {
		first []runner.Outcome
		want  string
	}{
		"one of two failed": {[]runner.Outcome{failed, {Class: runner.Executed}}, ""},
		"both failed":       {[]runner.Outcome{failed, failed}, "the first burst: every attempt (2 of 2) failed; the statement, as written, does not fit the schema"},
		"none ran yet":      {nil, ""},
	} {
		tg := &Target{first: c.first}
		err := tg.checkFirst()
		if (err == nil) != (c.want == "") || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
}

// A step is found by its own label, not by being the first marked one.
func TestStepLabeledFindsItsStep(t *testing.T) {
	s := mustParse(t, "SELECT 1;\nSELECT 2;\n", SQL)
	for i := range s.Steps {
		label := s.StepLabel(&s.Steps[i])
		if got := s.stepLabeled(label); got != &s.Steps[i] {
			t.Errorf("step %d (%s): found %+v", i, label, got)
		}
	}
	if got := s.stepLabeled("nowhere.sql:9"); got != nil {
		t.Errorf("an unknown label found %+v", got)
	}
}

// The small readers of target.go a whole mutation run found untested.
func TestTargetReaders(t *testing.T) {
	s := &Script{}
	for name, c := range map[string]struct {
		sc   Scripts
		want bool
	}{
		"an effects script": {Scripts{Attempt: s, Effects: s}, true},
		"effects auto":      {Scripts{Attempt: s, Auto: true}, false},
		"invariants only":   {Scripts{Attempt: s, Invariants: []*Script{s}}, false},
	} {
		if got := (&Target{sc: c.sc}).Baselined(); got != c.want {
			t.Errorf("%s: Baselined %v, want %v", name, got, c.want)
		}
	}
	// The last statement, past a meta-command after it.
	sc := mustParse(t, "SELECT 1;\n\\sleep 0\n", SQL)
	if got := sc.lastStatement(); got != &sc.Steps[0] {
		t.Errorf("last statement %+v, want SELECT 1", got)
	}
	// ReadOnly of a label no step has: false, not a nil step read.
	rt := &Target{sc: Scripts{Attempt: mustParse(t, "SELECT 1;\n", SQL)}}
	if rt.ReadOnly(0, "nowhere.sql:9") {
		t.Error("a label no step has read as read-only")
	}
	// A statement on a schedule's line: whole up to 48 characters.
	for in, want := range map[string]string{
		strings.Repeat("a", 48): strings.Repeat("a", 48),
		strings.Repeat("é", 49): strings.Repeat("é", 47) + "…",
		"SELECT  1\n  FROM t":   "SELECT 1 FROM t",
	} {
		if got := shortText(in); got != want {
			t.Errorf("shortText(%q) = %q, want %q", in, got, want)
		}
	}
}
