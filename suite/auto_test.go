package suite_test

import (
	"strings"
	"testing"

	"github.com/racetest/racetest/suite"
)

// effects: auto in a suite: a script case and an http case run solo twins
// (every burst unless solo_every says otherwise), watch what they name,
// and the shapes that cannot work are refused at their place in the file.
func TestSuiteEffectsAuto(t *testing.T) {
	ps, err := plans(t, `version: 1
defaults:
  connections: {postgres: default, mysql: default, redis: default}
cases:
  - name: sql auto
    backend: postgres
    sql:
      attempt: "UPDATE t SET n = n + 1;"
      effects: auto
      watch: [t, u]
  - name: redis auto
    redis:
      attempt: "INCR k:{{.Token}}"
      effects: auto
      watch: ["k:*"]
      solo_every: 3
  - name: http auto
    http:
      url: http://127.0.0.1:1/
      effects: auto:mysql
      watch: [t]
      solo_every: 2
  - name: counted
    backend: postgres
    sql:
      attempt: "UPDATE t SET n = n + 1;"
      effects: "SELECT 1;"
`, suite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []int{1, 3, 2, 0} {
		if got := ps[i].Config.SoloEvery; got != want {
			t.Errorf("case %d: solo twins every %d bursts, want %d", i, got, want)
		}
	}
	if sc := ps[0].Script.Scripts; !sc.Auto || sc.Effects != nil || strings.Join(sc.Watch, ",") != "t,u" {
		t.Errorf("sql auto: %+v", sc)
	}
	if ps[2].HTTP == nil || strings.Join(ps[2].HTTP.Watch, ",") != "t" {
		t.Errorf("http auto: %+v", ps[2].HTTP)
	}
	for name, tc := range map[string]struct{ src, want string }{
		"watch without auto":       {"    backend: postgres\n    sql:\n      attempt: \"SELECT 1;\"\n      effects: \"SELECT 1;\"\n      watch: [t]\n", "watch and solo_every shape effects: auto"},
		"watch empty name":         {"    backend: postgres\n    sql:\n      attempt: \"SELECT 1;\"\n      effects: auto\n      watch: [t, \"\"]\n", "watch: an empty name"},
		"watch empty list":         {"    backend: postgres\n    sql:\n      attempt: \"SELECT 1;\"\n      effects: auto\n      watch: []\n", "watch: [] names nothing"},
		"http watch empty name":    {"    http:\n      url: http://127.0.0.1:1/\n      effects: auto:postgres\n      watch: [\" \"]\n", "watch: an empty name"},
		"solo_every 0":             {"    backend: postgres\n    sql:\n      attempt: \"SELECT 1;\"\n      effects: auto\n      solo_every: 0\n", "solo_every must be at least 1 (got 0)"},
		"redis without watch":      {"    redis:\n      attempt: \"GET a\"\n      effects: auto\n", "effects: auto on Redis measures the keys watch names"},
		"allowed with auto":        {"    backend: postgres\n    sql:\n      attempt: \"SELECT 1;\"\n      effects: auto\n      allowed: 2\n", "allowed judges what effects counts, and effects: auto counts nothing"},
		"http allowed with auto":   {"    http:\n      url: http://127.0.0.1:1/\n      effects: auto:postgres\n      allowed: successes\n", "allowed judges what effects counts, and effects: auto counts nothing"},
		"http unknown store":       {"    http:\n      url: http://127.0.0.1:1/\n      effects: auto:oracle\n", "auto:postgres, auto:mysql, auto:redis or auto:mongo"},
		"http redis without watch": {"    http:\n      url: http://127.0.0.1:1/\n      effects: auto:redis\n", "effects: auto on Redis measures the keys watch names"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := plans(t, "version: 1\ndefaults:\n  connections: {postgres: default, mysql: default, redis: default}\ncases:\n  - name: x\n"+tc.src, suite.Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want %q", err, tc.want)
			}
		})
	}
}
