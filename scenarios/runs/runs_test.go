package runs

import (
	"testing"
	"time"
)

// Names are traced to a run only through racetest's scheme, and a name
// no registration claims is reported as unregistered: 'clean' leaves it.
func TestGroupClaimsOnlyRegisteredNames(t *testing.T) {
	for name, want := range map[string]string{
		"racetest_keep_b1:subject":    "keep",
		"racetest_1a2b3c4d_effects":   "1a2b3c4d",
		"racetest_Keep_b1":            "", // not the scheme: ids are lower case
		"racetest__effects":           "",
		"racetest_keep":               "", // no object part
		"my_racetest_keep_b1":         "",
		"racetest_0123456789abcdefg_": "", // 17 characters
	} {
		got, ok := RunOf(name)
		if got != want || ok != (want != "") {
			t.Errorf("RunOf(%q) = %q, %v; want %q", name, got, ok, want)
		}
	}
	rec := Record{RunID: "1a2b3c4d", Started: time.Now(), Host: "h", PID: 1}
	left := Group([]Record{rec}, []string{"racetest_keep_b1:subject", "racetest_1a2b3c4d_effects", "precious"})
	if len(left) != 2 {
		t.Fatalf("Group: %+v, want two runs", left)
	}
	for _, l := range left {
		switch l.RunID {
		case "1a2b3c4d":
			if !l.Registered || len(l.Objects) != 1 {
				t.Errorf("the registered run: %+v", l)
			}
		case "keep":
			if l.Registered || l.Record != nil {
				t.Errorf("the user's racetest_keep_b1:subject is claimed by a registration: %+v", l)
			}
		default:
			t.Errorf("unexpected run %+v", l)
		}
	}
}
