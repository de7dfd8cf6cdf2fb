package script

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/racetest/racetest/internal/bounded"
)

// Spec is a run's scripts as the user gave them: each inline text or
// @FILE, empty when not given. Attempt holds one script per transaction:
// one for every attempt, or several, attempt i running the i-th (round
// again when there are more attempts than scripts).
type Spec struct {
	Setup, Subject, Effects, Teardown string
	Attempt                           []string
	// Invariants are checked after each burst: each returns how many
	// times it is broken (0: it holds), or a boolean that must hold.
	Invariants []string
}

// FieldError is a script that did not load, with the field of a suite
// case it came from ("attempt", "attempt[1]", "invariant[0]"), so that a
// suite points at that field's line, not at its case's first one.
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string { return e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

// Load reads and parses the five scripts. A file named @FILE is read
// relative to dir (the suite file's directory; "" for the working
// directory); field names each script in messages ("--" + name for flags).
//
// An effects value of "auto" asks for no effects script: the run measures
// the store itself and compares each burst with a solo twin (Scripts.Auto).
func (s Spec) Load(dir string, d Dialect, field func(name string) string) (Scripts, error) {
	var sc Scripts
	if IsAuto(s.Effects) {
		sc.Auto, s.Effects = true, ""
	}
	type script struct {
		name  string
		value string
		scope Scope
		dst   **Script
		where string
		path  string // the field in a suite file: attempt, attempt[1]
	}
	scripts := []script{{"setup", s.Setup, ScopeRun, &sc.Setup, "", "setup"}, {"subject", s.Subject, ScopeBurst, &sc.Subject, "", "subject"}}
	attempts := s.Attempt
	if len(attempts) == 0 {
		attempts = []string{""}
	}
	sc.Attempts = make([]*Script, len(attempts))
	for i, a := range attempts {
		where, path := "", "attempt"
		if len(attempts) > 1 {
			// Each transaction's own name, so that its steps' labels differ.
			where, path = fmt.Sprintf("%s#%d", field("attempt"), i+1), fmt.Sprintf("attempt[%d]", i)
		}
		scripts = append(scripts, script{"attempt", a, ScopeAttempt, &sc.Attempts[i], where, path})
	}
	scripts = append(scripts, script{"effects", s.Effects, ScopeBurst, &sc.Effects, "", "effects"}, script{"teardown", s.Teardown, ScopeRun, &sc.Teardown, "", "teardown"})
	for _, x := range scripts {
		where := x.where
		if where == "" {
			where = field(x.name)
		}
		if strings.TrimSpace(x.value) == "" {
			if x.name == "attempt" {
				return sc, fmt.Errorf("%s is required: the %s script, inline or @FILE", where, x.name)
			}
			if x.name == "effects" && len(s.Invariants) == 0 && !sc.Auto {
				return sc, fmt.Errorf("%s is required, unless %s is given: the query that counts what the attempts did, inline or @FILE, or auto (each burst's change of the database, beside the same attempts one at a time)", where, field("invariant"))
			}
			continue
		}
		p, err := load(x.value, dir, d, x.scope, where)
		if err == nil && x.name == "effects" {
			err = refuseWrites(p, x.scope)
		}
		if err != nil {
			return sc, &FieldError{Field: x.path, Err: err}
		}
		*x.dst = p
	}
	sc.Attempt = sc.Attempts[0]
	for i, v := range s.Invariants {
		if strings.TrimSpace(v) == "" {
			return sc, &FieldError{Field: fmt.Sprintf("invariant[%d]", i),
				Err: fmt.Errorf("%s is empty: write a query that counts what breaks the invariant, inline or @FILE", field("invariant"))}
		}
		p, err := load(v, dir, d, ScopeBurst, field("invariant"))
		if err == nil {
			err = refuseWrites(p, ScopeBurst)
		}
		if err != nil {
			return sc, &FieldError{Field: fmt.Sprintf("invariant[%d]", i), Err: err}
		}
		sc.Invariants = append(sc.Invariants, p)
	}
	return sc, nil
}

// load reads and parses one script.
func load(value, dir string, d Dialect, scope Scope, where string) (*Script, error) {
	name, src, err := read(value, dir, where)
	if err != nil {
		return nil, err
	}
	p, err := Parse(name, src, d, scope, where)
	if err != nil {
		return nil, err
	}
	if p.Statements() == 0 {
		return nil, fmt.Errorf("%s (%s) has no statement: it would do nothing", where, name)
	}
	p.Inline = !strings.HasPrefix(value, "@")
	return p, nil
}

// MaxScriptSize is the largest script file read: a setup that loads seed
// data fits; /dev/zero, a pipe or a runaway file is refused at once.
const MaxScriptSize = 16 << 20

// read returns a script's name and text: @FILE is read, anything else is
// the script itself, named by where.
func read(value, dir, where string) (name, src string, err error) {
	if !strings.HasPrefix(value, "@") {
		return where, value, nil
	}
	path := strings.TrimPrefix(value, "@")
	if path == "" {
		return "", "", fmt.Errorf("%s @: name a file after the @", where)
	}
	if dir != "" && !filepath.IsAbs(path) {
		path = filepath.Join(dir, path)
	}
	b, err := bounded.ReadFile(path, MaxScriptSize)
	if err != nil {
		return "", "", fmt.Errorf("%s: cannot read the script: %w (a script is read whole, up to %s)", where, err, bounded.Size(MaxScriptSize))
	}
	return path, string(b), nil
}

// IsAuto reports whether an effects value asks for --effects auto.
func IsAuto(effects string) bool { return strings.TrimSpace(effects) == "auto" }

// Describe lists the scripts for the banner printed before the first burst.
func (sc Scripts) Describe() []string {
	var out []string
	for _, x := range []struct {
		role string
		s    *Script
	}{{"setup", sc.Setup}, {"subject", sc.Subject}, {"attempt", sc.Attempt}, {"effects", sc.Effects}, {"teardown", sc.Teardown}} {
		if x.s == nil && x.role == "effects" && sc.Auto {
			what := "every table of the schema"
			if len(sc.Watch) > 0 {
				what = strings.Join(sc.Watch, ", ")
			}
			out = append(out, fmt.Sprintf("%-9s auto: rows and numeric sums of %s, each burst beside the same attempts run one at a time", "effects", what))
		}
		if x.role == "attempt" && len(sc.Attempts) > 1 {
			for i, a := range sc.Attempts {
				out = append(out, describeOne("attempt "+string(rune('A'+i)), a))
			}
			continue
		}
		if x.s != nil {
			out = append(out, describeOne(x.role, x.s))
		}
	}
	for _, inv := range sc.Invariants {
		out = append(out, describeOne("invariant", inv))
	}
	return out
}

// describeOne is one script's line of the banner.
func describeOne(role string, s *Script) string {
	n := s.Statements()
	unit := s.lang().unit
	if n == 1 {
		unit = strings.TrimSuffix(unit, "s")
	}
	first := s.lastStatement().Text
	for i := range s.Steps {
		if s.Steps[i].Kind == Statement {
			first = s.Steps[i].Text
			break
		}
	}
	line := fmt.Sprintf("%-9s %s (%d %s)", role, s.Name, n, unit)
	if s.Inline {
		line = fmt.Sprintf("%-9s %s", role, oneLine(first))
		if n > 1 {
			line += fmt.Sprintf(" … (%d %s)", n, unit)
		}
	}
	return line
}
