package report

import (
	"strings"
	"testing"
	"time"

	"github.com/racetest/racetest/runner"
)

// A script's marks (file:line) get one symbol each and a legend, so the
// axis shows which statements interleaved; other names keep their letter.
func TestTimelineNamesScriptSteps(t *testing.T) {
	ms := func(names ...string) []runner.Mark {
		var out []runner.Mark
		for i, n := range names {
			out = append(out, runner.Mark{Name: n, At: time.Duration(i+1) * 10 * time.Millisecond})
		}
		return out
	}
	tr := &runner.Trace{Burst: 3, Effects: 2, Allowed: 1, Workers: []runner.WorkerTrace{
		{Worker: 0, Marks: ms("released", "redeem.sql:4", "redeem.sql:7", "done")},
		{Worker: 1, Marks: ms("released", "redeem.sql:4", "pay", "redeem.sql:12", "done")},
	}}
	var b strings.Builder
	Timeline(&b, tr)
	out := b.String()
	if !strings.Contains(out, "steps: 1 redeem.sql:4  2 redeem.sql:7  3 redeem.sql:12\n") {
		t.Errorf("no legend of the steps:\n%s", out)
	}
	var w1 string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "w1 ") {
			w1 = l
		}
	}
	if !strings.Contains(w1, "1") || !strings.Contains(w1, "p") || !strings.Contains(w1, "3") || strings.Contains(w1, "r-") {
		t.Errorf("worker 1's axis %q: want 1, p, 3", w1)
	}
	for _, name := range []string{"pay", "a:b", "x:", ":4"} {
		if isStepName(name) {
			t.Errorf("%q taken for a script step", name)
		}
	}
}
