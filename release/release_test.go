package release_test

import (
	"strings"
	"testing"

	"github.com/racetest/racetest/release"
	"github.com/racetest/racetest/runner"
)

func TestParseMode(t *testing.T) {
	for in, want := range map[string]release.Mode{
		"": release.Auto, "auto": release.Auto, "AUTO": release.Auto, "gate": release.Gate, "barrier": release.Gate, "GATE": release.Gate,
		"last-byte": release.LastByte, "last_byte": release.LastByte, "Last Byte": release.LastByte, "lastbyte": release.LastByte,
	} {
		got, err := release.ParseMode(in)
		if err != nil || got != want {
			t.Errorf("ParseMode(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	_, err := release.ParseMode("single-packet")
	if err == nil || !strings.Contains(err.Error(), "auto, gate, last-byte") {
		t.Errorf("ParseMode(single-packet) error = %v, want one naming the known modes", err)
	}
}

func TestNewGateNeedsNoHook(t *testing.T) {
	p, err := release.New("gate", "mysql")
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

// The default is auto: last-byte on every backend with a wire, no warning.
func TestDefaultIsLastByteWhereItApplies(t *testing.T) {
	for _, b := range []string{"redis", "mysql", "postgres", "mongo"} {
		for _, asked := range []string{"", "auto"} {
			p, err := release.New(asked, b)
			if err != nil {
				t.Fatal(err)
			}
			if p.Asked != release.Auto || p.Mode != release.LastByte || p.Wire == nil || p.Dial == nil || p.Warning != "" || p.Note != "" {
				t.Errorf("%s, %q: plan = %+v, want auto chosen as last-byte, with no warning", b, asked, p)
			}
			if cfg := runner.NewConfig(p.Options()...); cfg.ReleaseName() != "last-byte" {
				t.Errorf("%s: the run releases by %s, want last-byte", b, cfg.ReleaseName())
			}
		}
	}
}

// Auto on a backend with no wire is the gate, with no warning (nobody asked
// for a mode) but a note that names the gate and why, for the report.
func TestAutoFallsBackToTheGateWithANote(t *testing.T) {
	for backend, reason := range map[string]string{"memory": "no wire", release.Processes: "over HTTP", "http": "does not dial through"} {
		p, err := release.New("auto", backend)
		if err != nil {
			t.Fatal(err)
		}
		if p.Mode != release.Gate || p.Dial != nil || p.Wire != nil || p.Warning != "" {
			t.Errorf("%s: plan = %+v, want the gate and no warning", backend, p)
		}
		cfg := runner.NewConfig(p.Options()...)
		if cfg.Release != nil || len(cfg.Notes) != 1 || !strings.HasPrefix(cfg.Notes[0], "release: gate (auto") || !strings.Contains(cfg.Notes[0], reason) {
			t.Errorf("%s: notes %q, want one naming the gate and saying %q", backend, cfg.Notes, reason)
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

// A scenario whose first step sends nothing (memory-set) makes auto the
// gate, with a note saying why; a mode asked for by name stays.
func TestKeepGateMakesAutoTheGate(t *testing.T) {
	p, _ := release.New("", "redis")
	p.KeepGate("the check is in memory")
	cfg := runner.NewConfig(p.Options()...)
	if p.Mode != release.Gate || p.Dial != nil || cfg.Release != nil || len(cfg.Notes) != 1 || !strings.Contains(cfg.Notes[0], "release: gate (auto: the check is in memory)") {
		t.Errorf("auto on an in-process scenario: plan %+v, notes %q; want the gate, and a note why", p, cfg.Notes)
	}
	p, _ = release.New("last-byte", "redis")
	p.KeepGate("the check is in memory")
	if p.Mode != release.LastByte || p.Wire == nil || p.Note != "" {
		t.Errorf("last-byte asked for by name: plan %+v, want it kept", p)
	}
}
