package cmd

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
)

// A gate with one violated case and one that proved nothing failed for the
// violation: exit 1, not 4, whichever order the cases ran in, and the
// message counts the violation.
func TestViolatedOutranksInconclusive(t *testing.T) {
	reg := scriptedRegistry(scenarios.ExpectSafe)
	dir := t.TempDir()
	for _, order := range [][2]string{{"race", "inconclusive"}, {"inconclusive", "race"}} {
		file := filepath.Join(dir, order[0]+"-first.yaml")
		yaml := "defaults: {attempts: 4, bursts: 4}\ncases:\n  - scenario: v-" + order[0] + "\n  - scenario: v-" + order[1] + "\n"
		if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		_, errOut, code := execWith(t, reg, "suite", file)
		if code != 1 || !strings.Contains(errOut, "1 of 2 runs did not meet their expectation") {
			t.Errorf("%s then %s: exit %d, want 1 with the violation counted; stderr %q", order[0], order[1], code, errOut)
		}
	}
	// With only the inconclusive case, the same gate exits 4.
	file := filepath.Join(dir, "inconclusive.yaml")
	if err := os.WriteFile(file, []byte("defaults: {attempts: 4, bursts: 4}\ncases:\n  - scenario: v-inconclusive\n  - scenario: v-safe\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := execWith(t, reg, "suite", file); code != 4 || !strings.Contains(errOut, "1 of 2 runs were inconclusive") {
		t.Errorf("inconclusive and safe: exit %d, want 4; stderr %q", code, errOut)
	}
}

// A backend that refuses a parameter (an unknown variant, say) refused the
// user's input before anything ran: a usage error, exit 2, naming the case,
// not a setup error (3).
func TestRefusedParameterIsAUsageError(t *testing.T) {
	reg := scenarios.NewRegistry()
	reg.AddBackend(scenarios.Backend{Name: "memory"})
	reg.AddScenario(scenarios.Spec{Name: "picky", Lesson: "refuses a variant",
		Expect: func(scenarios.Params) scenarios.Expectation { return scenarios.ExpectSafe }})
	reg.Register("picky", "memory", func(context.Context, scenarios.Params) (runner.Target, error) {
		return nil, scenarios.BadParam(errors.New(`no variant "sideways" for picky on memory (want one of: plain)`))
	})
	// In a table (which stops before the report) and in JSON (which
	// reports the case first), the code is the same.
	for _, format := range []string{"table", "json"} {
		_, errOut, code := execWith(t, reg, "run", "picky", "-n", "2", "--bursts", "1", "-o", format)
		if code != 2 || !strings.Contains(errOut, `picky on memory: no variant "sideways"`) {
			t.Errorf("refused parameter, -o %s: exit %d, want 2; stderr %q", format, code, errOut)
		}
	}
	// A backend that cannot be set up is a setup error: exit 3.
	reg.AddScenario(scenarios.Spec{Name: "down", Lesson: "its server is down",
		Expect: func(scenarios.Params) scenarios.Expectation { return scenarios.ExpectSafe }})
	reg.Register("down", "memory", func(context.Context, scenarios.Params) (runner.Target, error) {
		return nil, errors.New("cannot connect to 127.0.0.1:1 (connection refused)")
	})
	for _, format := range []string{"table", "json"} {
		if _, errOut, code := execWith(t, reg, "run", "down", "-n", "2", "--bursts", "1", "-o", format); code != 3 || !strings.Contains(errOut, "connection refused") {
			t.Errorf("setup error, -o %s: exit %d, want 3; stderr %q", format, code, errOut)
		}
	}
	// A suite reports every case, then exits for the refused parameter.
	file := filepath.Join(t.TempDir(), "s.yaml")
	if err := os.WriteFile(file, []byte("cases:\n  - {scenario: down, attempts: 2, bursts: 1}\n  - {scenario: picky, attempts: 2, bursts: 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := execWith(t, reg, "suite", file); code != 2 || !strings.Contains(errOut, "picky on memory") {
		t.Errorf("suite with a refused parameter: exit %d, want 2; stderr %q", code, errOut)
	}
}
