package release_test

import (
	"strings"
	"testing"

	"github.com/racetest/racetest/release"
	"github.com/racetest/racetest/runner"
)

func TestParseMode(t *testing.T) {
	for in, want := range map[string]release.Mode{
		"": release.Gate, "gate": release.Gate, "barrier": release.Gate, "GATE": release.Gate,
		"last-byte": release.LastByte, "last_byte": release.LastByte, "Last Byte": release.LastByte, "lastbyte": release.LastByte,
	} {
		got, err := release.ParseMode(in)
		if err != nil || got != want {
			t.Errorf("ParseMode(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	_, err := release.ParseMode("single-packet")
	if err == nil || !strings.Contains(err.Error(), "gate, last-byte") {
		t.Errorf("ParseMode(single-packet) error = %v, want one naming the known modes", err)
	}
}

func TestNewGateNeedsNoHook(t *testing.T) {
	p, err := release.New("", "mysql")
	if err != nil {
		t.Fatal(err)
	}
	if p.Mode != release.Gate || p.Dial != nil || p.Wire != nil || p.Warning != "" || len(p.Options()) != 0 {
		t.Errorf("gate plan = %+v, want the gate with no dial hook, no options and no warning", p)
	}
}

func TestNewLastByteOnWireBackends(t *testing.T) {
	for _, b := range []string{"redis", "mysql", "postgres", "mongo"} {
		p, err := release.New("last-byte", b)
		if err != nil {
			t.Fatal(err)
		}
		if p.Mode != release.LastByte || p.Dial == nil || p.Wire == nil || p.Warning != "" {
			t.Errorf("%s: plan = %+v, want last-byte with a dial hook", b, p)
		}
		cfg := runner.NewConfig(p.Options()...)
		if cfg.Release == nil || cfg.ReleaseName() != "last-byte" {
			t.Errorf("%s: runner config release = %v, want the wire", b, cfg.Release)
		}
	}
}

// A mode that does not apply says so and falls back, in the plan and in the
// run's report (a note), never silently.
func TestNewFallsBackWithAWarning(t *testing.T) {
	for backend, reason := range map[string]string{
		"memory": "no wire", "http": "does not dial through",
	} {
		p, err := release.New("last-byte", backend)
		if err != nil {
			t.Fatal(err)
		}
		if p.Mode != release.Gate || p.Asked != release.LastByte || p.Dial != nil {
			t.Errorf("%s: plan = %+v, want a fallback to the gate", backend, p)
		}
		if !strings.Contains(p.Warning, reason) || !strings.Contains(p.Warning, "through the gate instead") {
			t.Errorf("%s: warning %q, want it to say %q and that the gate is used", backend, p.Warning, reason)
		}
		cfg := runner.NewConfig(p.Options()...)
		if cfg.Release != nil || len(cfg.Notes) != 1 || !strings.Contains(cfg.Notes[0], p.Warning) {
			t.Errorf("%s: runner config = release %v, notes %q; want the gate and the warning as a note", backend, cfg.Release, cfg.Notes)
		}
	}
	if _, err := release.New("sideways", "mysql"); err == nil {
		t.Error("New with an unknown mode: no error")
	}
}
