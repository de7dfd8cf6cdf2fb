package cmd

import (
	"errors"
	"strings"
	"testing"

	"github.com/racetest/racetest/internal/testenv"
	"github.com/racetest/racetest/scenarios/builtin"
)

// withdraw is a read-then-write withdrawal of 80 from a balance of 100,
// judged by an invariant alone (no --effects): no balance below 0.
func withdraw(update string) []string {
	return []string{"-b", "postgres", "--isolation", "read-committed",
		"--setup", "CREATE TABLE rt_acct_{{.RunID}} (token text, balance int);",
		"--subject", "INSERT INTO rt_acct_{{.RunID}} VALUES ('{{.Token}}', 100);",
		"--attempt", "SELECT balance FROM rt_acct_{{.RunID}} WHERE token = '{{.Token}}' \\gset\n\\if :balance >= 80\n" + update + "\n\\endif",
		"--invariant", "SELECT count(*) FROM rt_acct_{{.RunID}} WHERE balance < 0;",
		"--teardown", "DROP TABLE rt_acct_{{.RunID}};"}
}

// explore and replay take --invariant, as sql does (issue 42, item 5: the
// --effects auto refusal and the README suggested it, and it was an
// unknown flag): an order that breaks it is a violation, RACE, named
// after it; orders that all keep it are SAFE on it alone, without
// --effects; the violating order's replay breaks it again.
func TestExploreJudgesByInvariants(t *testing.T) {
	naive := withdraw("UPDATE rt_acct_{{.RunID}} SET balance = balance - 80 WHERE token = '{{.Token}}';")
	out, stderr, code := execWith(t, builtin.Registry(), append([]string{"explore", "sql", "--confirm", "0"}, naive...)...)
	if code == exitSetup {
		testenv.Unavailable(t, "postgres", errors.New(stderr))
	}
	flat := strings.Join(strings.Fields(out), " ")
	if code != exitViolated || !strings.Contains(flat, "RACE 2 of 4 orders broke the invariant SELECT count(*) FROM rt_acct_{{.RunID}} WHERE balance < 0") ||
		!strings.Contains(flat, "— broke the invariant SELECT count(*)") {
		t.Fatalf("the naive withdrawal: exit %d, want 1 and RACE on the invariant\n%s%s", code, out, stderr)
	}
	out, stderr, code = execWith(t, builtin.Registry(), append([]string{"replay", "sql", "--schedule", "A1 B1 A2 B2"}, naive...)...)
	if flat := strings.Join(strings.Fields(out), " "); code != exitViolated ||
		!strings.Contains(flat, "RACE this order (A1 B1 A2 B2) broke the invariant SELECT count(*)") {
		t.Errorf("replay of the violating order: exit %d, want 1\n%s%s", code, out, stderr)
	}
	fixed := withdraw("UPDATE rt_acct_{{.RunID}} SET balance = balance - 80 WHERE token = '{{.Token}}' AND balance >= 80;")
	out, stderr, code = execWith(t, builtin.Registry(), append([]string{"explore", "sql", "--confirm", "20"}, fixed...)...)
	if flat := strings.Join(strings.Fields(out), " "); code != exitOK ||
		!strings.Contains(flat, "SAFE for every order at this step granularity: all 4 orders of 2 attempts × 2 steps") ||
		!strings.Contains(flat, "kept 1 invariant; each step is one whole statement") {
		t.Errorf("the conditional withdrawal: exit %d, want SAFE on the invariant\n%s%s", code, out, stderr)
	}
	// --allowed judges what --effects counts: without it, refused.
	_, stderr, code = execWith(t, builtin.Registry(), append([]string{"explore", "sql", "--allowed", "0-1"}, fixed...)...)
	if code != exitUsage || !strings.Contains(stderr, "there is no --effects: the invariants alone judge each order") {
		t.Errorf("--allowed without --effects: exit %d, want 2\n%s", code, stderr)
	}
}
