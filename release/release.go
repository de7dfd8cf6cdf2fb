// Package release decides how a burst's attempts leave the client together.
//
// Three names, chosen by a plain string (for flags and suite files):
//
//   - auto (the default): last-byte where it applies (redis, mysql,
//     postgres, mongo), the gate everywhere else. It is the strongest mode
//     the backend allows: measured with 'racetest bench', the gate exposes
//     fewer races than a naive launcher on every server backend.
//   - gate (also spelled barrier): every worker holds its own
//     pre-dialled connection and parks on one gate, which opens once. Works on
//     every backend, the embedded one included.
//   - last-byte: each worker starts its attempt at once; its connection sends
//     the first request of the attempt's first step (the first request written
//     after the attempt's first w.Mark) except the final byte of its first
//     protocol message, and parks; when every attempt has parked (or a bounded
//     wait ran out) the held bytes are written at once, by one loop per CPU.
//     The requests are then complete at the server within microseconds of each
//     other, whatever the Go scheduler did. A driver's own round trips (a
//     prepare, a ping, a statement close) pass and the request after them is
//     held. It needs a backend whose driver dials through
//     scenarios.Params.Dial and gives each worker a connection of its own.
//
// A Plan, and its Wire, serve one run at a time.
//
// A run asks for a mode with New, which falls back to the gate, with a
// warning, where the mode does not apply:
//
//	plan, err := release.New(mode, backend)   // err: an unknown mode name
//	if plan.Warning != "" { ... tell the user ... }
//	params.Dial = plan.Dial                   // nil for the gate
//	cfg := runner.NewConfig(append(opts, plan.Options()...)...)
package release

import (
	"context"
	"fmt"
	"net"
	"strings"

	"github.com/racetest/racetest/runner"
)

// Mode is a release mode's name.
type Mode string

const (
	// Gate parks every worker on one gate that opens once.
	Gate Mode = "gate"
	// LastByte holds back the final byte of each attempt's first request
	// and writes them all in one loop.
	LastByte Mode = "last-byte"
)

// Auto is last-byte where it applies, else the gate: never a warning, and
// the run's report names the mode it became.
const Auto Mode = "auto"

// Default is the mode a run uses when none is asked for.
const Default = Auto

// Modes lists the modes in the order help text names them.
func Modes() []Mode { return []Mode{Auto, Gate, LastByte} }

// Names is Modes as a string for help text: "auto, gate, last-byte".
func Names() string {
	names := make([]string, 0, 3)
	for _, m := range Modes() {
		names = append(names, string(m))
	}
	return strings.Join(names, ", ")
}

// ParseMode reads a mode name. "" is the default (auto); "barrier" (the HTTP
// commands' name for the gate) is the gate; case, '_' and ' ' are forgiven.
func ParseMode(name string) (Mode, error) {
	key := strings.ToLower(strings.NewReplacer("_", "-", " ", "-").Replace(strings.TrimSpace(name)))
	switch key {
	case "", "auto":
		return Default, nil
	case "gate", "barrier":
		return Gate, nil
	case "last-byte", "lastbyte":
		return LastByte, nil
	}
	return "", fmt.Errorf("unknown release mode %q (known: %s)", name, Names())
}

// wireBackends are the backends whose every worker connection is dialled
// through Params.Dial and owned by one worker, so that last-byte applies.
var wireBackends = map[string]bool{"redis": true, "mysql": true, "postgres": true, "mongo": true}

// why says, for a backend last-byte does not apply to, why not.
var why = map[string]string{
	"memory": "the memory backend has no wire: its attempts never leave the process",
	// 'run --processes': the attempts go over HTTP to 'racetest serve'
	// replicas, whose own database connections are not the workers'.
	Processes: "with --processes the attempts reach the replicas over HTTP, and the replicas' database connections are not the workers' own",
}

// Processes is the backend name to pass to New for a run whose replicas are
// processes.
const Processes = "processes"

// Plan is a release mode made ready for one run on one backend.
type Plan struct {
	// Asked is the mode the user asked for; Mode the one the run will use.
	Asked, Mode Mode
	// Warning, when not empty, says why Mode differs from Asked. Show it to
	// the user; it is also a note in the run's report.
	Warning string
	// Note, when not empty, is the report's line for a mode auto chose
	// that the report would not otherwise name (the gate).
	Note string
	// Dial is the run's scenarios.Params.Dial: nil for the gate.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Wire is the last-byte release, nil for the gate.
	Wire *Wire
}

// New makes mode ready for a run on backend. The only error is an unknown
// mode name; a mode that does not apply to the backend falls back to the
// gate with a Warning, never silently. Auto becomes last-byte where it
// applies and the gate elsewhere, with a Note that says so.
func New(mode, backend string) (*Plan, error) {
	m, err := ParseMode(mode)
	if err != nil {
		return nil, err
	}
	p := &Plan{Asked: m, Mode: m}
	if m == Gate {
		return p, nil
	}
	if !wireBackends[backend] {
		reason := why[backend]
		if reason == "" {
			reason = fmt.Sprintf("backend %s does not dial through racetest's connection hook", backend)
		}
		p.Mode = Gate
		if m == Auto {
			// Nobody asked for a mode: no warning, but the report says
			// which one ran, and why.
			p.Note = fmt.Sprintf("release: gate (auto: last-byte does not apply: %s)", reason)
			return p, nil
		}
		p.Warning = fmt.Sprintf("%s does not apply here: %s; released through the gate instead", m, reason)
		return p, nil
	}
	p.Mode = LastByte
	p.Wire = NewWire(backend, 0)
	p.Dial = p.Wire.Dial
	return p, nil
}

// KeepGate tells an auto plan why the scenario should keep the gate (see
// scenarios.Spec.AutoGate: a first step that sends nothing, a cluster):
// auto then uses the gate, and the report's note says why. A mode asked
// for by name is left as it is; an empty why changes nothing.
func (p *Plan) KeepGate(why string) {
	if why == "" || p.Asked != Auto || p.Mode != LastByte {
		return
	}
	p.Mode, p.Wire, p.Dial = Gate, nil, nil
	p.Note = "release: gate (auto: " + why + ")"
}

// Options are the runner options of the plan: the wire release, or the
// fallback's note.
func (p *Plan) Options() []runner.Option {
	var opts []runner.Option
	if p.Wire != nil {
		opts = append(opts, runner.Release(p.Wire))
	}
	if p.Warning != "" {
		opts = append(opts, runner.Note("release: "+p.Warning))
	}
	if p.Note != "" {
		opts = append(opts, runner.Note(p.Note))
	}
	return opts
}
