package cmd

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/racetest/racetest/internal/testenv"
	"github.com/racetest/racetest/scenarios/builtin"
)

// branchScript is an attempt whose \if takes a branch only in some
// orders: it counts a row up and reads it again, and only when another
// attempt counted it up in between (never when the attempts run one after
// the other) does it check, then insert, an effect. Two attempts that both
// take the branch and check before either inserts leave two effects.
var branchScript = []string{
	"--isolation", "read-committed",
	"--setup", "CREATE TABLE rt_br_{{.RunID}} (token text, n int); CREATE TABLE rt_br_e_{{.RunID}} (token text);",
	"--subject", "INSERT INTO rt_br_{{.RunID}} VALUES ('{{.Token}}', 0);",
	"--attempt", `SELECT n AS before FROM rt_br_{{.RunID}} WHERE token = '{{.Token}}' \gset
UPDATE rt_br_{{.RunID}} SET n = n + 1 WHERE token = '{{.Token}}';
SELECT n - :before AS moved FROM rt_br_{{.RunID}} WHERE token = '{{.Token}}' \gset
\if :moved > 1
SELECT count(*) AS taken FROM rt_br_e_{{.RunID}} WHERE token = '{{.Token}}' \gset
\if :taken = 0
INSERT INTO rt_br_e_{{.RunID}} VALUES ('{{.Token}}');
\endif
\endif`,
	"--effects", "SELECT count(*) FROM rt_br_e_{{.RunID}} WHERE token = '{{.Token}}';",
	"--allowed", "0-1",
	"--teardown", "DROP TABLE rt_br_{{.RunID}}; DROP TABLE rt_br_e_{{.RunID}};",
}

// An attempt that branches into steps explore did not plan (issue 42,
// item 3): alone it takes 3 steps, so the orders were planned with 3; in
// some orders it took 5, and those two steps ran after every planned one,
// never among the other attempt's, so the violating orders never ran and
// explore said SAFE; their replay was refused ("B takes 3 steps"). Now the
// attempts are planned again with the longest path each took, the race is
// found, and its replay runs it.
func TestExploreFollowsABranchItDidNotPlan(t *testing.T) {
	args := append([]string{"explore", "sql", "-b", "postgres", "--expect", "race", "-o", "json", "--confirm", "0"}, branchScript...)
	out, stderr, code := execWith(t, builtin.Registry(), args...)
	if code == exitSetup {
		testenv.Unavailable(t, "postgres", errors.New(stderr))
	}
	var doc struct {
		Verdict   string `json:"verdict"`
		Why       string `json:"why"`
		Violating []struct {
			Replay string `json:"replay"`
		} `json:"violating"`
		Result struct {
			Replanned int      `json:"replanned"`
			Notes     []string `json:"notes"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("exit %d: %v\n%s%s", code, err, out, stderr)
	}
	if code != exitOK || doc.Verdict != "RACE" || doc.Result.Replanned < 1 || len(doc.Violating) == 0 ||
		!strings.Contains(strings.Join(doc.Result.Notes, "\n"), "planned again (round 2): attempt") {
		t.Fatalf("exit %d, verdict %s (%s), planned again %d times, notes %q: want the race found after planning again",
			code, doc.Verdict, doc.Why, doc.Result.Replanned, doc.Result.Notes)
	}
	// The violating order names steps past the 3 the attempt takes alone:
	// its replay runs it, and breaks again.
	words := shellWords(t, doc.Violating[0].Replay)
	out, stderr, code = execWith(t, builtin.Registry(), words[1:]...)
	if code != exitViolated || !strings.Contains(out, "RACE  this order") {
		t.Errorf("%s\nexit %d, want 1 and the order's RACE\n%s%s", doc.Violating[0].Replay, code, out, stderr)
	}
	// A step past the plan that the attempt did not take in the order
	// named (serial: no branch) is refused, after the order, by name.
	replay := append([]string{"replay", "sql", "-b", "postgres", "--schedule", "A1 A2 A3 B1 B2 B3 B4"}, branchScript...)
	_, stderr, code = execWith(t, builtin.Registry(), replay...)
	if code != exitUsage || !strings.Contains(stderr, "--schedule names B4, but attempt B takes 3 steps (B1..B3), alone and in this order") {
		t.Errorf("a step never taken: exit %d, want 2\n%s", code, stderr)
	}
}
