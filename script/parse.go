package script

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/racetest/racetest/scenarios"
)

// MetaCommands are the backslash commands a script may use, as error
// messages list them.
const MetaCommands = `\gset, \if, \elif, \else, \endif, \sleep, \decline`

// Pos is a place in a script: file:line:col, 1-based.
type Pos struct {
	File      string
	Line, Col int
}

func (p Pos) String() string {
	if p.Col > 0 {
		return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col)
	}
	return fmt.Sprintf("%s:%d", p.File, p.Line)
}

// Label is the step's name on a timeline: the file's base name and the line.
func (p Pos) Label() string { return fmt.Sprintf("%s:%d", filepath.Base(p.File), p.Line) }

// SyntaxError is a script that does not parse, or names a template field
// that does not exist where it is used.
type SyntaxError struct {
	Pos Pos
	Msg string
}

func (e *SyntaxError) Error() string { return e.Pos.String() + ": " + e.Msg }

// Kind is what a step does.
type Kind uint8

const (
	// Statement sends one statement or command to the store.
	Statement Kind = iota
	// Branch evaluates Cond and jumps to Else when it is false.
	Branch
	// Jump continues at Else (the end of an \if chain).
	Jump
	// Sleep waits Sleep (a deliberate gap).
	Sleep
	// Decline ends the attempt as a deliberate "no".
	Decline
)

// Tx is how a statement moves the transaction state.
type Tx uint8

const (
	TxNone  Tx = iota
	TxBegin    // BEGIN, START TRANSACTION; MULTI
	TxEnd      // COMMIT, END, ROLLBACK (not ROLLBACK TO SAVEPOINT); EXEC, DISCARD
)

// Step is one instruction of a compiled script.
type Step struct {
	Kind Kind
	Pos  Pos
	// Text is the statement as written (templates unexpanded), for messages.
	Text string
	// parts are the statement's pieces, each a template: the whole text for
	// SQL, one per argument for Redis.
	parts []*piece
	// Gset keeps the reply's values as variables; GsetName is the SQL
	// prefix, or the Redis variable's name.
	Gset     bool
	GsetName string
	Tx       Tx
	Cond     *Cond
	// Else is the step to continue at when Cond is false (Branch), or the
	// end of the chain (Jump).
	Else  int
	Sleep *Operand
	// Reason says why a \decline declined, when the script says.
	Reason string
}

// Marked reports whether the step's start is marked on the timeline: every
// statement but the one that opens a transaction, so that a last-byte
// release holds back the first statement that reads or writes.
func (s *Step) Marked() bool { return s.Kind == Statement && s.Tx != TxBegin }

// piece is one template-bearing string: plain text when tmpl is nil.
type piece struct {
	raw  string
	tmpl *template.Template
}

// Script is a parsed, compiled script.
type Script struct {
	Name    string
	Dialect Dialect
	Steps   []Step
	// Inline is set for a script given as text rather than @FILE.
	Inline bool
}

// Statements counts the steps that reach the store.
func (s *Script) Statements() int {
	n := 0
	for i := range s.Steps {
		if s.Steps[i].Kind == Statement {
			n++
		}
	}
	return n
}

// Scope names the template fields a script may use.
type Scope uint8

const (
	// ScopeRun: --setup and --teardown, which run once: {{.RunID}}.
	ScopeRun Scope = iota
	// ScopeBurst: --subject and --effects, once per burst: also {{.Token}}, {{.Burst}}.
	ScopeBurst
	// ScopeAttempt: --attempt: also {{.Attempt}}.
	ScopeAttempt
)

func (s Scope) fields() []string {
	switch s {
	case ScopeRun:
		return []string{"RunID"}
	case ScopeBurst:
		return []string{"RunID", "Token", "Burst"}
	}
	return []string{"RunID", "Token", "Burst", "Attempt"}
}

// Parse compiles src, the text of the script called name, in dialect d.
// Templates may name only the fields of scope; where names the flag or
// suite field the script came from, for messages ("--setup").
func Parse(name, src string, d Dialect, scope Scope, where string) (*Script, error) {
	p := &parser{s: &Script{Name: name, Dialect: d}, lang: languageOf(d), scope: scope, where: where}
	if err := p.lang.split(p, src); err != nil {
		return nil, err
	}
	if err := p.closeChains(); err != nil {
		return nil, err
	}
	return p.s, nil
}

type parser struct {
	s     *Script
	lang  *language
	scope Scope
	where string
	// open \if chains: for each, the Branch waiting for its Else and the
	// Jumps waiting for the chain's end.
	chains []*chain
}

type chain struct {
	pos     Pos
	branch  int // index of the pending Branch, -1 after \else
	jumps   []int
	hasElse bool
}

func (p *parser) pos(line, col int) Pos { return Pos{File: p.s.Name, Line: line, Col: col} }

func (p *parser) errf(line, col int, format string, a ...any) error {
	return &SyntaxError{Pos: p.pos(line, col), Msg: fmt.Sprintf(format, a...)}
}

func splitMeta(line string) (name, arg string) {
	sp := strings.IndexAny(line, " \t")
	if sp < 0 {
		return line, ""
	}
	return line[:sp], strings.TrimSpace(line[sp:])
}

// addStatement compiles a statement's templates and appends it.
func (p *parser) addStatement(text string, parts []string, line, col int, gset bool, gsetName string) error {
	st := Step{Kind: Statement, Pos: p.pos(line, col), Text: text, Gset: gset, GsetName: gsetName}
	if gsetName != "" && !isIdent(gsetName) {
		return p.errf(line, col, `\gset %s: a prefix is letters, digits and '_'`, gsetName)
	}
	for _, part := range parts {
		pc, err := p.piece(part, line, col)
		if err != nil {
			return err
		}
		st.parts = append(st.parts, pc)
	}
	st.Tx = p.lang.tx(text)
	p.s.Steps = append(p.s.Steps, st)
	return nil
}

// piece compiles one template and proves, with sample values, that it names
// only fields of the parser's scope.
func (p *parser) piece(s string, line, col int) (*piece, error) {
	if !strings.Contains(s, "{{") {
		return &piece{raw: s}, nil
	}
	// Where the template starts, for messages: its line and column inside s.
	at := strings.Index(s, "{{")
	tl, tc := line+strings.Count(s[:at], "\n"), col+at
	if nl := strings.LastIndexByte(s[:at], '\n'); nl >= 0 {
		tc = at - nl
	}
	t, err := template.New(p.s.Name).Option("missingkey=error").Parse(s)
	if err != nil {
		return nil, p.errf(tl, tc, "template: %s", templateReason(err))
	}
	if err := t.Execute(discard{}, sample(p.scope)); err != nil {
		return nil, p.errf(tl, tc, "template: %s — %s knows %s", templateReason(err), p.where, fieldList(p.scope))
	}
	return &piece{raw: s, tmpl: t}, nil
}

func fieldList(s Scope) string {
	var b []string
	for _, f := range s.fields() {
		b = append(b, "{{."+f+"}}")
	}
	return strings.Join(b, ", ")
}

// templateReason strips text/template's "template: name:1:2: executing …"
// preamble down to the cause.
func templateReason(err error) string {
	msg := err.Error()
	if i := strings.LastIndex(msg, ": "); i >= 0 && strings.HasPrefix(msg, "template: ") {
		msg = msg[i+2:]
	}
	return msg
}

type discard struct{}

func (discard) Write(b []byte) (int, error) { return len(b), nil }

func sample(s Scope) map[string]any {
	m := map[string]any{}
	for _, f := range s.fields() {
		switch f {
		case "Burst", "Attempt":
			m[f] = 0
		default:
			m[f] = "x"
		}
	}
	return m
}

// meta compiles one backslash command other than \gset.
func (p *parser) meta(name, arg string, line, col int) error {
	pos := p.pos(line, col)
	switch name {
	case `\if`:
		c, err := p.cond(arg, line, col)
		if err != nil {
			return err
		}
		p.s.Steps = append(p.s.Steps, Step{Kind: Branch, Pos: pos, Text: name + " " + arg, Cond: c})
		p.chains = append(p.chains, &chain{pos: pos, branch: len(p.s.Steps) - 1})
	case `\elif`:
		ch, err := p.chain(name, line, col)
		if err != nil {
			return err
		}
		c, err := p.cond(arg, line, col)
		if err != nil {
			return err
		}
		p.s.Steps = append(p.s.Steps, Step{Kind: Jump, Pos: pos, Text: name})
		ch.jumps = append(ch.jumps, len(p.s.Steps)-1)
		p.s.Steps[ch.branch].Else = len(p.s.Steps)
		p.s.Steps = append(p.s.Steps, Step{Kind: Branch, Pos: pos, Text: name + " " + arg, Cond: c})
		ch.branch = len(p.s.Steps) - 1
	case `\else`:
		ch, err := p.chain(name, line, col)
		if err != nil {
			return err
		}
		if arg != "" {
			return p.errf(line, col, `\else takes no condition (got %q) — did you mean \elif?`, arg)
		}
		p.s.Steps = append(p.s.Steps, Step{Kind: Jump, Pos: pos, Text: name})
		ch.jumps = append(ch.jumps, len(p.s.Steps)-1)
		p.s.Steps[ch.branch].Else = len(p.s.Steps)
		ch.branch, ch.hasElse = -1, true
	case `\endif`:
		if len(p.chains) == 0 {
			return p.errf(line, col, `\endif without \if`)
		}
		ch := p.chains[len(p.chains)-1]
		p.chains = p.chains[:len(p.chains)-1]
		end := len(p.s.Steps)
		if ch.branch >= 0 {
			p.s.Steps[ch.branch].Else = end
		}
		for _, j := range ch.jumps {
			p.s.Steps[j].Else = end
		}
	case `\sleep`:
		if arg == "" {
			return p.errf(line, col, `\sleep needs a duration: \sleep 20 ms (units us, ms, s; default s)`)
		}
		op, err := p.sleepArg(arg, line, col)
		if err != nil {
			return err
		}
		p.s.Steps = append(p.s.Steps, Step{Kind: Sleep, Pos: pos, Text: name + " " + arg, Sleep: op})
	case `\decline`:
		p.s.Steps = append(p.s.Steps, Step{Kind: Decline, Pos: pos, Text: strings.TrimSpace(name + " " + arg), Reason: arg})
	default:
		return p.errf(line, col, "unknown meta-command %s%s — supported: %s", name, didYouMean(name), MetaCommands)
	}
	return nil
}

// knownMeta reports whether name is one of MetaCommands.
func knownMeta(name string) bool {
	return slices.Contains(strings.Split(MetaCommands, ", "), name)
}

// didYouMean is " (did you mean \gset?)" for a near miss of a
// meta-command, else "".
func didYouMean(name string) string {
	// A near miss only: the backslash and two letters in common (\gsett,
	// \sleap), not any short word (\foo is not "\if").
	if s := scenarios.Suggest(name, strings.Split(MetaCommands, ", ")); s != "" && len(name) >= 3 && strings.HasPrefix(s, name[:3]) {
		return " (did you mean " + s + "?)"
	}
	return ""
}

func (p *parser) chain(name string, line, col int) (*chain, error) {
	if len(p.chains) == 0 {
		return nil, p.errf(line, col, `%s without \if`, name)
	}
	ch := p.chains[len(p.chains)-1]
	if ch.hasElse {
		return nil, p.errf(line, col, `%s after \else (the \if at line %d already has its \else)`, name, ch.pos.Line)
	}
	return ch, nil
}

func (p *parser) closeChains() error {
	if n := len(p.chains); n > 0 {
		ch := p.chains[n-1]
		return &SyntaxError{Pos: ch.pos, Msg: `\if without \endif`}
	}
	return nil
}

// sleepArg reads \sleep's argument: a number (or :variable) and an optional
// unit, us, ms or s (pgbench's), or a Go duration such as 20ms.
func (p *parser) sleepArg(arg string, line, col int) (*Operand, error) {
	f := strings.Fields(arg)
	if len(f) > 2 {
		return nil, p.errf(line, col, `\sleep %s: want a number and a unit, e.g. \sleep 20 ms`, arg)
	}
	op, err := p.operand(f[0], line, col)
	if err != nil {
		return nil, err
	}
	unit := "s"
	if len(f) == 2 {
		unit = f[1]
	}
	if _, ok := units[unit]; !ok {
		return nil, p.errf(line, col, `\sleep %s: unknown unit %q — use us, ms or s`, arg, unit)
	}
	op.unit = unit
	if op.kind == literal {
		if _, err := op.duration(op.text); err != nil {
			return nil, p.errf(line, col, `\sleep %s: %v`, arg, err)
		}
	}
	return op, nil
}

var units = map[string]time.Duration{"us": time.Microsecond, "ms": time.Millisecond, "s": time.Second}

func (o *Operand) duration(v string) (time.Duration, error) {
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		if f < 0 {
			return 0, fmt.Errorf("a sleep cannot be negative (got %s)", v)
		}
		return time.Duration(f * float64(units[o.unit])), nil
	}
	if o.unit == "s" {
		if d, err := time.ParseDuration(v); err == nil && d >= 0 {
			return d, nil
		}
	}
	return 0, fmt.Errorf("%q is not a duration (want a number, or a Go duration such as 20ms)", v)
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
