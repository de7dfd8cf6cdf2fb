package report

import (
	"fmt"
	"strings"
	"testing"

	"github.com/racetest/racetest/runner"
)

func holdConn(n int, stmts ...runner.HoldStatement) runner.HoldConn {
	return runner.HoldConn{Conn: n, Transactions: [][]runner.HoldStatement{stmts}}
}

// The story of a held burst names the read every held request ran before
// its held write, and the write, as a person explains the race.
func TestHoldStory(t *testing.T) {
	read := runner.HoldStatement{Text: "SELECT count(*) FROM redemptions WHERE user_id = $1"}
	begin := runner.HoldStatement{Text: "BEGIN"}
	write := runner.HoldStatement{Text: "INSERT INTO redemptions (user_id) VALUES ($1)", Writes: true, Held: true}
	other := runner.HoldStatement{Text: "UPDATE stock SET n = n - $1", Writes: true, Held: true}
	for _, c := range []struct {
		name  string
		conns []runner.HoldConn
		want  string
	}{
		{"check then write", []runner.HoldConn{holdConn(1, begin, read, write), holdConn(2, read, runner.HoldStatement{Text: ""}, write)},
			"2 requests each ran `SELECT count(*) FROM redemptions WHERE user_id = $1` before any ran `INSERT INTO redemptions (user_id) VALUES ($1)` (the proxy held each until all had reached it)"},
		{"different writes", []runner.HoldConn{holdConn(1, read, write), holdConn(2, read, other), holdConn(3, read, write)},
			"3 requests each ran `SELECT count(*) FROM redemptions WHERE user_id = $1` before any ran its first write or lock (the proxy held each until all had reached it)"},
		{"no read before", []runner.HoldConn{holdConn(1, begin, write), holdConn(2, write)},
			"2 requests reached `INSERT INTO redemptions (user_id) VALUES ($1)` together (the proxy held each until all had reached it)"},
		{"different reads", []runner.HoldConn{holdConn(1, read, write), holdConn(2, runner.HoldStatement{Text: "SELECT 1"}, write)},
			"2 requests reached `INSERT INTO redemptions (user_id) VALUES ($1)` together (the proxy held each until all had reached it)"},
		{"one held", []runner.HoldConn{holdConn(1, read, write), holdConn(2, read)}, ""},
		{"a statement after the held one is not its read", []runner.HoldConn{holdConn(1, read, write, runner.HoldStatement{Text: "SELECT 2"}), holdConn(2, read, write)},
			"2 requests each ran `SELECT count(*) FROM redemptions WHERE user_id = $1` before any ran `INSERT INTO redemptions (user_id) VALUES ($1)` (the proxy held each until all had reached it)"},
	} {
		if got := HoldStory(&runner.Hold{Conns: c.conns}); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
	long := strings.Repeat("x", 200)
	if q := quoteSQL(long); len([]rune(q)) != 82 || !strings.HasSuffix(q, "…`") {
		t.Errorf("a long statement is cut to 80 characters: %q", q)
	}
}

// A case through a proxy says how many bursts met at the hold point, and a
// RACE tells the story of its first violating burst that met.
func TestHoldLines(t *testing.T) {
	read := runner.HoldStatement{Text: "SELECT 1"}
	write := runner.HoldStatement{Text: "INSERT INTO t VALUES ($1)", Writes: true, Held: true}
	met := &runner.Hold{Met: 2, Attempts: 2, Conns: []runner.HoldConn{holdConn(1, read, write), holdConn(2, read, write)}}
	apart := &runner.Hold{Met: 1, Attempts: 2, Untested: true, Why: "timed out"}
	ans := [runner.NumClasses]int{runner.Executed: 2}
	r := &runner.Result{Bursts: []runner.Burst{
		{Index: 0, Hold: apart, Effects: 2, Allowed: 1, Overlap: 2, Outcomes: ans},
		{Index: 1, Hold: met, Effects: 1, Allowed: 1, Overlap: 2, Outcomes: ans},
		{Index: 2, Hold: met, Effects: 2, Allowed: 1, Overlap: 2, Outcomes: ans},
	}}
	lines := holdLines(r, Assessment{Verdict: Race})
	want := []string{
		"database proxy: the requests of 2 of 3 bursts met at its hold point (each request's first write or lock held until every request had reached one)",
		"at the database, burst 2: 2 requests each ran `SELECT 1` before any ran `INSERT INTO t VALUES ($1)` (the proxy held each until all had reached it)",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("RACE:\n got %q\nwant %q", lines, want)
	}
	if lines := holdLines(r, Assessment{Verdict: Safe}); len(lines) != 1 || lines[0] != want[0] {
		t.Errorf("SAFE: %q, want the count alone", lines)
	}
	if lines := holdLines(&runner.Result{Bursts: []runner.Burst{{}}}, Assessment{Verdict: Race}); lines != nil {
		t.Errorf("no proxy: %q, want nothing", lines)
	}
	if !(runner.Burst{Hold: met, Overlap: 2, Outcomes: ans}).Tested() || (runner.Burst{Hold: apart, Overlap: 2, Outcomes: ans}).Tested() {
		t.Error("a burst whose requests met is tested, one whose did not is not")
	}
}

// The INCONCLUSIVE line of a run whose untested bursts all missed the hold
// point names the first of them, not the first burst.
func TestUnheldWhy(t *testing.T) {
	ans := [runner.NumClasses]int{runner.Executed: 1, runner.Declined: 1}
	r := &runner.Result{}
	for i := range 10 {
		b := runner.Burst{Index: i, Effects: 1, Allowed: 1, Overlap: 2, Outcomes: ans, Hold: &runner.Hold{Met: 2, Attempts: 2}}
		if i > 0 {
			b.Hold = &runner.Hold{Met: 1, Attempts: 2, Untested: true, Why: fmt.Sprintf("burst %d timed out", i)}
		}
		r.Bursts = append(r.Bursts, b)
	}
	want := "the requests of 9 of 10 bursts never met at the database proxy's hold point (burst 1: burst 1 timed out)"
	if got := untested(r, r.Tested()); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

// The HTML report's trace: each connection of the raced burst, its
// transactions in brackets, the held statement marked, pings left out.
func TestHoldTrace(t *testing.T) {
	read := runner.HoldStatement{Text: "SELECT 1"}
	write := runner.HoldStatement{Text: "INSERT INTO t VALUES ($1)", Writes: true, Held: true}
	ans := [runner.NumClasses]int{runner.Executed: 2}
	met := &runner.Hold{Met: 2, Attempts: 2, Conns: []runner.HoldConn{
		{Conn: 1, Transactions: [][]runner.HoldStatement{{read}, {{Text: ""}}, {write}}},
		{Conn: 2, Transactions: [][]runner.HoldStatement{{{Text: "BEGIN"}, read, write, {Text: "COMMIT"}}}},
	}}
	r := &runner.Result{Bursts: []runner.Burst{
		{Index: 0, Hold: &runner.Hold{Untested: true}, Effects: 1, Allowed: 1, Overlap: 2, Outcomes: ans},
		{Index: 1, Hold: met, Effects: 2, Allowed: 1, Overlap: 2, Outcomes: ans},
	}}
	want := []string{
		"burst 1, connection 1: [SELECT 1] [INSERT INTO t VALUES ($1) (held)]",
		"burst 1, connection 2: [BEGIN; SELECT 1; INSERT INTO t VALUES ($1) (held); COMMIT]",
	}
	if got := holdTrace(r); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if got := holdTrace(&runner.Result{Bursts: []runner.Burst{{}}}); got != nil {
		t.Errorf("no proxy: %q", got)
	}
}
