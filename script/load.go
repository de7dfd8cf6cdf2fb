package script

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/racetest/racetest/internal/bounded"
	"github.com/racetest/racetest/scenarios"
)

// Spec is a run's five scripts as the user gave them: each inline text or
// @FILE, empty when not given.
type Spec struct {
	Setup, Subject, Attempt, Effects, Teardown string
}

// Backends lists the backends each dialect runs on.
var Backends = map[Dialect][]string{SQL: {"postgres", "mysql"}, Redis: {"redis"}, Mongo: {"mongo"}}

// DialectOf is the dialect of backend's scripts.
func DialectOf(backend string) (Dialect, bool) {
	for d, bs := range Backends {
		for _, b := range bs {
			if b == backend {
				return d, true
			}
		}
	}
	return 0, false
}

// Load reads and parses the five scripts. A file named @FILE is read
// relative to dir (the suite file's directory; "" for the working
// directory); field names each script in messages ("--" + name for flags).
func (s Spec) Load(dir string, d Dialect, field func(name string) string) (Scripts, error) {
	var sc Scripts
	for _, x := range []struct {
		name  string
		value string
		scope Scope
		dst   **Script
	}{
		{"setup", s.Setup, ScopeRun, &sc.Setup},
		{"subject", s.Subject, ScopeBurst, &sc.Subject},
		{"attempt", s.Attempt, ScopeAttempt, &sc.Attempt},
		{"effects", s.Effects, ScopeBurst, &sc.Effects},
		{"teardown", s.Teardown, ScopeRun, &sc.Teardown},
	} {
		where := field(x.name)
		if strings.TrimSpace(x.value) == "" {
			if x.name == "attempt" || x.name == "effects" {
				return sc, fmt.Errorf("%s is required: the %s script, inline or @FILE", where, x.name)
			}
			continue
		}
		name, src, err := read(x.value, dir, where)
		if err != nil {
			return sc, err
		}
		p, err := Parse(name, src, d, x.scope, where)
		if err != nil {
			return sc, err
		}
		if p.Statements() == 0 {
			return sc, fmt.Errorf("%s (%s) has no statement: it would do nothing", where, name)
		}
		p.Inline = !strings.HasPrefix(x.value, "@")
		*x.dst = p
	}
	return sc, nil
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

// Open connects to backend's server for a run with p.
func Open(ctx context.Context, backend string, p scenarios.Params) (Store, error) {
	switch backend {
	case "postgres":
		return OpenPostgres(ctx, p)
	case "mysql":
		return OpenMySQL(ctx, p)
	case "redis":
		return OpenRedis(ctx, p)
	case "mongo":
		return OpenMongo(ctx, p)
	}
	return nil, scenarios.BadParam(fmt.Errorf("scripts run on postgres, mysql, redis or mongo, not %q", backend))
}

// Describe lists the scripts for the banner printed before the first burst.
func (sc Scripts) Describe() []string {
	var out []string
	for _, x := range []struct {
		role string
		s    *Script
	}{{"setup", sc.Setup}, {"subject", sc.Subject}, {"attempt", sc.Attempt}, {"effects", sc.Effects}, {"teardown", sc.Teardown}} {
		if x.s == nil {
			continue
		}
		n := x.s.Statements()
		unit := "statements"
		if x.s.Dialect != SQL {
			unit = "commands"
		}
		if n == 1 {
			unit = strings.TrimSuffix(unit, "s")
		}
		first := x.s.lastStatement().Text
		for i := range x.s.Steps {
			if x.s.Steps[i].Kind == Statement {
				first = x.s.Steps[i].Text
				break
			}
		}
		line := fmt.Sprintf("%-9s %s (%d %s)", x.role, x.s.Name, n, unit)
		if x.s.Inline {
			line = fmt.Sprintf("%-9s %s", x.role, oneLine(first))
			if n > 1 {
				line += fmt.Sprintf(" … (%d %s)", n, unit)
			}
		}
		out = append(out, line)
	}
	return out
}
