package script

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/racetest/racetest/runner"
)

// Data are the template values of one run of a script.
type Data struct {
	RunID string
	// Token names the burst's subject, unique across runs: "<run id>-<burst>".
	Token   string
	Burst   int
	Attempt int
}

func (d Data) values() map[string]any {
	return map[string]any{"RunID": d.RunID, "Token": d.Token, "Burst": d.Burst, "Attempt": d.Attempt}
}

// Stmt is one statement as sent to the store: templates and variables
// already expanded.
type Stmt struct {
	// Text is the SQL statement (SQL dialect).
	Text string
	// Args are the command and its arguments (Redis dialect).
	Args []string
	// Query says the values of the reply are needed (a \gset, the count
	// of an effects script): the store must return them, a query rather
	// than an exec.
	Query bool
}

// Reply is what the store answered to one statement.
type Reply struct {
	// Columns and Values are the first row of the result (SQL), or the
	// reply itself under Columns = nil (Redis). NULL and nil read as "".
	Columns []string
	Values  []string
	// Rows is how many rows the statement returned or changed (ROW_COUNT).
	Rows int64
	// Kind is what the store answered, where a check must tell: one value,
	// a Redis array, a MongoDB cursor's documents or count.
	Kind ReplyKind
	// More: a MongoDB cursor's documents did not fit its first batch.
	More bool
	// Command is the command answered (MongoDB: the document's first key).
	Command string
}

// ReplyKind is the shape of a reply.
type ReplyKind uint8

const (
	// ReplyValue: a row (SQL), a Redis reply that is not an array.
	ReplyValue ReplyKind = iota
	// ReplyArray: a Redis array (or map): Rows elements.
	ReplyArray
	// ReplyDocuments: a MongoDB cursor (find, aggregate): Rows documents, the
	// first's fields in Columns and Values.
	ReplyDocuments
	// ReplyCount: a MongoDB reply with an n (count): Rows is n.
	ReplyCount
)

// Conn is one connection to a store, as a script sees it. Each worker has
// its own; it is used by one goroutine at a time.
type Conn interface {
	Exec(ctx context.Context, st Stmt) (Reply, error)
	// Classify says what a failed statement means: runner.Declined for a
	// duplicate key, runner.Conflict for a deadlock or a serialization
	// failure, runner.Error otherwise; schema reports an error that is
	// the statement's own (syntax, a table or command that does not
	// exist), as opposed to the server's or the network's.
	Classify(err error) (class runner.Class, schema bool)
	// Rollback ends the connection's open transaction, if any.
	Rollback(ctx context.Context) error
}

// Quoter is implemented by a Conn whose server quotes literals its own
// way (MySQL's backslash escapes).
type Quoter interface {
	QuoteLiteral(s string) string
}

// ScriptError is a script that failed by itself, not through the store: a
// variable that was never set, a \gset on a query that returned no row, a
// script that ends inside its transaction.
type ScriptError struct {
	Pos  Pos
	Text string
	Msg  string
}

func (e *ScriptError) Error() string {
	return fmt.Sprintf("%s: %s: %s", e.Pos, oneLine(e.Text), e.Msg)
}

// StatementError is a statement the store refused. Schema reports an
// error of the statement's own (syntax, a missing table) rather than the
// server's.
type StatementError struct {
	Pos    Pos
	Text   string
	Err    error
	Schema bool
}

func (e *StatementError) Error() string {
	return fmt.Sprintf("%s: %s: %v", e.Pos, oneLine(e.Text), e.Err)
}
func (e *StatementError) Unwrap() error { return e.Err }

// Declined is why an attempt declined at a \decline.
type Declined struct {
	Pos    Pos
	Reason string
}

func (e *Declined) Error() string {
	if e.Reason != "" {
		return fmt.Sprintf(`\decline at %s: %s`, e.Pos, e.Reason)
	}
	return fmt.Sprintf(`\decline at %s`, e.Pos)
}

// oneLine shortens a statement to one line for messages.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 80 {
		s = string(r[:79]) + "…"
	}
	return s
}

// Exec is one run of a script on one connection, carried out step by step:
// a controller may stop between any two steps (Next says which comes), and
// Run goes straight through.
type Exec struct {
	s      *Script
	conn   Conn
	data   map[string]any
	vars   map[string]string
	pc     int
	txLine int // line of the BEGIN of the open transaction, 0 when none
	txText string
	done   bool
	out    runner.Outcome
	last   Reply
	// queryLast asks for the values of the last statement's reply.
	queryLast bool
	buf       strings.Builder
}

// Start begins a run of s on conn with d's template values. vars, when not
// nil, are variables set before the first step (and are changed by it).
func (s *Script) Start(conn Conn, d Data, vars map[string]string) *Exec {
	if vars == nil {
		vars = map[string]string{}
	}
	e := &Exec{s: s, conn: conn, data: d.values(), vars: vars}
	e.done = len(s.Steps) == 0
	e.out = runner.Done()
	return e
}

// Done reports whether the run has ended.
func (e *Exec) Done() bool { return e.done }

// Next is the step the next call to Step carries out, or nil when done.
func (e *Exec) Next() *Step {
	if e.done {
		return nil
	}
	return &e.s.Steps[e.pc]
}

// Outcome is the run's outcome once it is done: executed when it reached
// the end of the script.
func (e *Exec) Outcome() runner.Outcome { return e.out }

// QueryLast asks for the values of the reply to the script's last
// statement (an effects script's count), as a \gset would.
func (e *Exec) QueryLast() { e.queryLast = true }

// Vars are the run's variables.
func (e *Exec) Vars() map[string]string { return e.vars }

// Last is the reply to the last statement that ran.
func (e *Exec) Last() Reply { return e.last }

// Run carries out every step, calling mark with the label of each marked
// step before it starts, and returns the outcome.
func (e *Exec) Run(ctx context.Context, mark func(label string)) runner.Outcome {
	for !e.done {
		if st := &e.s.Steps[e.pc]; mark != nil && st.Marked() {
			mark(e.s.StepLabel(st))
		}
		e.Step(ctx)
	}
	return e.out
}

// StepLabel names a marked step on a timeline or in a schedule: the file
// and line ("redeem.sql:4"), and the column too when another marked step
// shares the line ("--attempt:1:10"), so that each step has a name of its
// own.
func (s *Script) StepLabel(st *Step) string {
	for i := range s.Steps {
		if o := &s.Steps[i]; o != st && o.Marked() && o.Pos.Line == st.Pos.Line && o.Pos.File == st.Pos.File {
			return fmt.Sprintf("%s:%d", st.Pos.Label(), st.Pos.Col)
		}
	}
	return st.Pos.Label()
}

// Step carries out the next step.
func (e *Exec) Step(ctx context.Context) {
	if e.done {
		return
	}
	st := &e.s.Steps[e.pc]
	e.pc++
	switch st.Kind {
	case Statement:
		e.statement(ctx, st)
	case Branch:
		ok, err := e.eval(st.Cond)
		if err != nil {
			e.fail(ctx, runner.Failed(&ScriptError{Pos: st.Pos, Text: st.Text, Msg: err.Error()}))
			return
		}
		if !ok {
			e.pc = st.Else
		}
	case Jump:
		e.pc = st.Else
	case Sleep:
		v, err := e.value(st.Sleep)
		var d time.Duration
		if err == nil {
			d, err = st.Sleep.duration(v)
		}
		if err != nil {
			e.fail(ctx, runner.Failed(&ScriptError{Pos: st.Pos, Text: st.Text, Msg: err.Error()}))
			return
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			e.fail(ctx, runner.Failed(context.Cause(ctx)))
			return
		}
	case Decline:
		e.fail(ctx, runner.Refused(&Declined{Pos: st.Pos, Reason: st.Reason}))
		return
	}
	if e.pc >= len(e.s.Steps) && !e.done {
		e.done = true
		if e.txLine > 0 {
			e.fail(ctx, runner.Failed(&ScriptError{Pos: Pos{File: e.s.Name, Line: e.txLine}, Text: e.txText,
				Msg: "the script ended inside this transaction — end it with COMMIT or ROLLBACK (EXEC or DISCARD)"}))
		}
	}
}

// fail ends the run with o, rolling back its open transaction.
func (e *Exec) fail(ctx context.Context, o runner.Outcome) {
	e.done, e.out = true, o
	if e.txLine > 0 {
		e.txLine = 0
		// The attempt may have run out of time: the rollback gets its own.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = e.conn.Rollback(rctx)
	}
}

func (e *Exec) statement(ctx context.Context, st *Step) {
	stmt, err := e.stmt(st)
	if err != nil {
		e.fail(ctx, runner.Failed(&ScriptError{Pos: st.Pos, Text: st.Text, Msg: err.Error()}))
		return
	}
	reply, err := e.conn.Exec(ctx, stmt)
	if err != nil {
		if ctx.Err() != nil {
			e.fail(ctx, runner.Failed(err))
			return
		}
		class, schema := e.conn.Classify(err)
		serr := &StatementError{Pos: st.Pos, Text: st.Text, Err: err, Schema: schema}
		switch class {
		case runner.Declined:
			e.fail(ctx, runner.Refused(serr))
		case runner.Conflict:
			e.fail(ctx, runner.Retry(serr))
		default:
			e.fail(ctx, runner.Failed(serr))
		}
		return
	}
	e.last = reply
	e.vars["ROW_COUNT"] = strconv.FormatInt(reply.Rows, 10)
	switch st.Tx {
	case TxBegin:
		e.txLine, e.txText = st.Pos.Line, st.Text
	case TxEnd:
		e.txLine = 0
	}
	if st.Gset {
		if err := e.s.lang().gset(e.vars, st.GsetName, reply); err != nil {
			e.fail(ctx, runner.Failed(&ScriptError{Pos: st.Pos, Text: st.Text, Msg: err.Error()}))
		}
	}
}

// stmt is st as it is sent: its templates expanded, then its variables
// put in as its language does.
func (e *Exec) stmt(st *Step) (Stmt, error) {
	text, err := e.expand(st.parts[0])
	if err != nil {
		return Stmt{}, err
	}
	stmt, err := e.s.lang().stmt(e, text)
	if err != nil {
		return Stmt{}, err
	}
	if stmt.empty() {
		return Stmt{}, errors.New("the statement is empty once its templates are expanded — check the {{…}} in it")
	}
	stmt.Query = st.Gset || e.queryLast && st == e.s.lastStatement()
	return stmt, nil
}

// empty reports a statement with nothing to send.
func (s Stmt) empty() bool {
	if len(s.Args) > 0 {
		return s.Args[0] == ""
	}
	return strings.Trim(s.Text, " \t\r\n;{}") == ""
}

func (e *Exec) expand(pc *piece) (string, error) {
	if pc.tmpl == nil {
		return pc.raw, nil
	}
	e.buf.Reset()
	if err := pc.tmpl.Execute(&e.buf, e.data); err != nil {
		return "", fmt.Errorf("template: %s", templateReason(err))
	}
	return e.buf.String(), nil
}

func (e *Exec) value(o *Operand) (string, error) {
	switch o.kind {
	case variable:
		v, ok := e.vars[o.text]
		if !ok {
			return "", fmt.Errorf("variable %s is not set — set it with \\gset on an earlier query", o.text)
		}
		return v, nil
	case tmpl:
		return e.expand(o.pc)
	}
	return o.text, nil
}

func (e *Exec) eval(c *Cond) (bool, error) {
	l, err := e.value(c.Left)
	if err != nil {
		return false, err
	}
	if c.Right == nil {
		b, ok := boolean(l)
		if !ok {
			return false, fmt.Errorf("%s is %q, not a boolean (true/false, on/off, yes/no, 1/0) — compare it instead: \\if %s = …", c.Left, l, c.Left)
		}
		return b, nil
	}
	r, err := e.value(c.Right)
	if err != nil {
		return false, err
	}
	return compare(l, c.Op, r), nil
}

// IsScriptError reports whether err is the script's own failure (a
// ScriptError, or a StatementError of the statement's own making).
func IsScriptError(err error) bool {
	var se *ScriptError
	if errors.As(err, &se) {
		return true
	}
	var st *StatementError
	return errors.As(err, &st) && st.Schema
}
