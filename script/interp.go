package script

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
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
}

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
	stmt := Stmt{Query: st.Gset || e.queryLast && st == e.s.lastStatement()}
	var err error
	if e.s.Dialect == Redis {
		var line string
		if line, err = e.expand(st.parts[0]); err == nil {
			var serr *splitErr
			if stmt.Args, _, serr = splitRedis(line); serr != nil {
				err = fmt.Errorf("once its templates are expanded, the command %q does not split into arguments: %s", line, serr.msg)
			}
		}
		for i := 0; err == nil && i < len(stmt.Args); i++ {
			stmt.Args[i], err = e.redisArg(stmt.Args[i])
		}
	} else if e.s.Dialect == Mongo {
		stmt.Text, err = e.expand(st.parts[0])
		if err == nil {
			stmt.Text, err = e.mongoVars(stmt.Text)
		}
	} else {
		stmt.Text, err = e.expand(st.parts[0])
		if err == nil {
			stmt.Text = e.interpolate(stmt.Text)
		}
	}
	if err == nil && (e.s.Dialect == Redis && (len(stmt.Args) == 0 || stmt.Args[0] == "") || e.s.Dialect != Redis && strings.Trim(stmt.Text, " \t\r\n;{}") == "") {
		err = errors.New("the statement is empty once its templates are expanded — check the {{…}} in it")
	}
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
		if err := e.gset(st, reply); err != nil {
			e.fail(ctx, runner.Failed(&ScriptError{Pos: st.Pos, Text: st.Text, Msg: err.Error()}))
		}
	}
}

func (e *Exec) gset(st *Step, r Reply) error {
	if e.s.Dialect == Mongo {
		for i, c := range r.Columns {
			e.vars[st.GsetName+c] = r.Values[i]
		}
		return nil
	}
	if e.s.Dialect == Redis {
		v := ""
		if len(r.Values) > 0 {
			v = r.Values[0]
		}
		e.vars[st.GsetName] = v
		return nil
	}
	switch {
	case r.Rows == 0 || len(r.Values) == 0:
		return fmt.Errorf(`\gset: the query returned no row — \gset needs exactly one (use count(*) or coalesce to always return one)`)
	case r.Rows > 1:
		return fmt.Errorf(`\gset: the query returned %d rows — \gset needs exactly one (add WHERE or LIMIT 1)`, r.Rows)
	}
	for i, c := range r.Columns {
		name := st.GsetName + c
		if !isIdent(name) {
			return fmt.Errorf(`\gset: column %q is not a variable name — name it with AS (SELECT count(*) AS used …)`, c)
		}
		e.vars[name] = r.Values[i]
	}
	return nil
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

// redisArg replaces an argument that is exactly :name or :'name' by the
// variable's value. Only whole arguments: keys such as coupon:used hold
// colons of their own.
func (e *Exec) redisArg(a string) (string, error) {
	name := ""
	switch {
	case strings.HasPrefix(a, ":'") && strings.HasSuffix(a, "'") && isIdent(a[2:len(a)-1]):
		name = a[2 : len(a)-1]
	case strings.HasPrefix(a, ":") && isIdent(a[1:]):
		name = a[1:]
	default:
		return a, nil
	}
	v, ok := e.vars[name]
	if !ok {
		return "", fmt.Errorf("variable %s is not set — set it with \\gset %s on an earlier command", name, name)
	}
	return v, nil
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

// interpolate replaces :name, :'name' and :"name" outside quotes and
// comments by the variable's value, as a literal or an identifier for the
// quoted forms. A name that is not a variable stays as written (a ::cast,
// a :label), as in psql.
func (e *Exec) interpolate(s string) string {
	if !strings.Contains(s, ":") {
		return s
	}
	var b strings.Builder
	i := 0
	for i < len(s) {
		c := s[i]
		switch {
		case c == '\'' || c == '"' || c == '`':
			j := i + 1
			for j < len(s) {
				if s[j] == '\\' && c == '\'' {
					j += 2
					continue
				}
				if s[j] == c {
					if j+1 < len(s) && s[j+1] == c {
						j += 2
						continue
					}
					break
				}
				j++
			}
			j = min(j+1, len(s))
			b.WriteString(s[i:j])
			i = j
		case c == '-' && strings.HasPrefix(s[i:], "--"):
			j := strings.IndexByte(s[i:], '\n')
			if j < 0 {
				j = len(s) - i
			}
			b.WriteString(s[i : i+j])
			i += j
		case c == '$' && dollarTag(s[i:]) != "":
			tag := dollarTag(s[i:])
			j := strings.Index(s[i+len(tag):], tag)
			if j < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			end := i + len(tag) + j + len(tag)
			b.WriteString(s[i:end])
			i = end
		case c == ':' && i+1 < len(s) && s[i+1] != ':' && (i == 0 || s[i-1] != ':'):
			n, val, ok := e.variableAt(s[i+1:])
			if !ok {
				b.WriteByte(c)
				i++
				continue
			}
			b.WriteString(val)
			i += 1 + n
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String()
}

// variableAt reads name, 'name' or "name" at the start of s; it returns how
// many bytes it used and the text to put in its place.
func (e *Exec) variableAt(s string) (n int, val string, ok bool) {
	quote := byte(0)
	if s[0] == '\'' || s[0] == '"' {
		quote = s[0]
		end := strings.IndexByte(s[1:], quote)
		if end < 0 || !isIdent(s[1:1+end]) {
			return 0, "", false
		}
		v, ok := e.vars[s[1:1+end]]
		if !ok {
			return 0, "", false
		}
		if quote == '"' {
			return end + 2, `"` + strings.ReplaceAll(v, `"`, `""`) + `"`, true
		}
		if q, ok := e.conn.(Quoter); ok {
			return end + 2, q.QuoteLiteral(v), true
		}
		return end + 2, "'" + strings.ReplaceAll(v, "'", "''") + "'", true
	}
	j := 0
	for j < len(s) && (s[j] == '_' || s[j] >= 'a' && s[j] <= 'z' || s[j] >= 'A' && s[j] <= 'Z' || j > 0 && s[j] >= '0' && s[j] <= '9') {
		j++
	}
	if j == 0 {
		return 0, "", false
	}
	v, ok := e.vars[s[:j]]
	if !ok {
		return 0, "", false
	}
	return j, v, true
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

var mongoVar = regexp.MustCompile(`":'?([A-Za-z_][A-Za-z0-9_]*)'?"`)

// mongoVars replaces a JSON string that is exactly ":name" by the
// variable's value, as a JSON string.
func (e *Exec) mongoVars(text string) (string, error) {
	var missing string
	out := mongoVar.ReplaceAllStringFunc(text, func(m string) string {
		name := mongoVar.FindStringSubmatch(m)[1]
		v, ok := e.vars[name]
		if !ok {
			missing = name
			return m
		}
		b, _ := json.Marshal(v)
		return string(b)
	})
	if missing != "" {
		return "", fmt.Errorf("variable %s is not set — set it with \\gset on an earlier command", missing)
	}
	return out, nil
}
