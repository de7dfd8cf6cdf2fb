package builtin

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
)

// nowhere is an address on every server backend where no server listens:
// a build that gets past its parameters fails to connect, quickly.
func nowhere(reg *scenarios.Registry) scenarios.Connections {
	addr := map[string]string{
		"redis": "redis://127.0.0.1:1/0", "mysql": "root@tcp(127.0.0.1:1)/test",
		"postgres": "postgres://postgres@127.0.0.1:1/test?connect_timeout=1", "mongo": "mongodb://127.0.0.1:1/?directConnection=true&serverSelectionTimeoutMS=500",
	}
	var c scenarios.Connections
	for _, b := range reg.Backends() {
		if b.Conn != nil {
			c.Set(b.Conn.Key, addr[b.Name])
		}
		if b.ReadConn != nil { // a replica, nowhere too
			c.Set(b.ReadConn.Key, addr[b.Name])
		}
	}
	return c
}

// The variants, isolation levels and engines a backend declares (and help
// text and completions list) are the ones its scenarios accept: a declared
// value is never refused as a bad parameter, and an undeclared one is.
func TestDeclaredKnobsAreAccepted(t *testing.T) {
	reg := Registry()
	conn := nowhere(reg)
	build := func(scenario, backend string, p scenarios.Params) error {
		p.RunID, p.Attempts, p.Replicas, p.TTL, p.Latency, p.Conn = scenarios.NewRunID(), 2, 1, scenarios.DefaultTTL, 0, conn
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		target, err := reg.Build(ctx, scenario, backend, p)
		if err == nil {
			// The embedded store builds; nothing was prepared to clean.
			if cl, ok := target.(runner.Closer); ok {
				cl.Close()
			}
		}
		return err
	}
	isBad := func(err error) bool { var bad *scenarios.ParamError; return errors.As(err, &bad) }
	checked := 0
	for _, s := range reg.Scenarios() {
		for _, b := range reg.BackendsOf(s.Name) {
			for _, v := range reg.Variants(s.Name, b) {
				if err := build(s.Name, b, scenarios.Params{Variant: v}); isBad(err) {
					t.Errorf("%s on %s refuses its declared variant %q: %v", s.Name, b, v, err)
				}
				checked++
			}
			if err := build(s.Name, b, scenarios.Params{Variant: "no-such-variant"}); !isBad(err) {
				t.Errorf("%s on %s: an undeclared variant gives %v, want a bad parameter", s.Name, b, err)
			}
		}
	}
	for _, b := range reg.Backends() {
		for _, e := range b.Engines {
			if err := build(scenarios.UniqueInsert, b.Name, scenarios.Params{Engine: e}); isBad(err) {
				t.Errorf("%s refuses its declared engine %q: %v", b.Name, e, err)
			}
			checked++
		}
		for _, l := range b.Isolations {
			if err := build(scenarios.UniqueInsert, b.Name, scenarios.Params{Isolation: l}); isBad(err) {
				t.Errorf("%s refuses its declared isolation level %q: %v", b.Name, l, err)
			}
			checked++
		}
		if len(b.Engines) > 0 {
			if err := build(scenarios.UniqueInsert, b.Name, scenarios.Params{Engine: "no-such-engine"}); !isBad(err) {
				t.Errorf("%s: an undeclared engine gives %v, want a bad parameter", b.Name, err)
			}
		}
		if len(b.Isolations) > 0 {
			if err := build(scenarios.UniqueInsert, b.Name, scenarios.Params{Isolation: "no-such-level"}); !isBad(err) {
				t.Errorf("%s: an undeclared isolation level gives %v, want a bad parameter", b.Name, err)
			}
		}
	}
	if checked < 30 {
		t.Fatalf("only %d declared values checked: the catalog lost its declarations", checked)
	}
}
