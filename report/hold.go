package report

import (
	"fmt"
	"strings"

	"github.com/racetest/racetest/runner"
)

// holdLines say what a database proxy did (racetest http --proxy): how many
// bursts' requests met at its hold point, and, for a RACE or LOST, the
// statements that decided it in the example burst.
func holdLines(r *runner.Result, a Assessment) []string {
	held, met := 0, 0
	for _, b := range r.Bursts {
		if b.Hold == nil {
			continue
		}
		held++
		if !b.Hold.Untested {
			met++
		}
	}
	if held == 0 {
		return nil
	}
	lines := []string{fmt.Sprintf("database proxy: the requests of %d of %d bursts met at its hold point (each request's first write or lock held until every request had reached one)", met, held)}
	if a.Verdict != Race && a.Verdict != Lost {
		return lines
	}
	for _, b := range r.Bursts {
		if b.Violated() && b.Hold != nil && !b.Hold.Untested {
			if story := HoldStory(b.Hold); story != "" {
				lines = append(lines, fmt.Sprintf("at the database, burst %d: %s", b.Index, story))
			}
			break
		}
	}
	return lines
}

// HoldStory tells, as a person would explain the race, what the requests
// held together did: "2 requests each ran `SELECT …` before any ran
// `INSERT …`". It names the last statement each held request ran before
// its held one, when they all ran the same, and the held statement; "" when
// nothing was held.
func HoldStory(h *runner.Hold) string {
	var reads, writes []string
	for _, c := range h.Conns {
		last, held := "", ""
	conn:
		for _, tx := range c.Transactions {
			for _, st := range tx {
				if st.Held {
					held = st.Text
					break conn
				}
				// An empty statement is a pool's ping ("-- ping"): no read.
				if strings.TrimSpace(st.Text) != "" && !isTxControl(st.Text) {
					last = st.Text
				}
			}
		}
		if held != "" {
			reads, writes = append(reads, last), append(writes, held)
		}
	}
	if len(writes) < 2 {
		return ""
	}
	what := quoteSQL(writes[0])
	if !allSame(writes) {
		what = "its first write or lock"
	}
	n := len(writes)
	if reads[0] != "" && allSame(reads) {
		return fmt.Sprintf("%d requests each ran %s before any ran %s (the proxy held each until all had reached it)", n, quoteSQL(reads[0]), what)
	}
	return fmt.Sprintf("%d requests reached %s together (the proxy held each until all had reached it)", n, what)
}

func allSame(xs []string) bool {
	for _, x := range xs[1:] {
		if x != xs[0] {
			return false
		}
	}
	return true
}

// isTxControl: BEGIN, START TRANSACTION, SET …: statements that read nothing.
func isTxControl(text string) bool {
	w, _, _ := strings.Cut(strings.ToUpper(strings.TrimSpace(text)), " ")
	switch strings.TrimSuffix(w, ";") {
	case "BEGIN", "START", "SET", "SAVEPOINT", "USE":
		return true
	}
	return false
}

// quoteSQL puts a statement in backticks, cut to a readable length.
func quoteSQL(text string) string {
	const most = 80
	if r := []rune(text); len(r) > most {
		text = string(r[:most-1]) + "…"
	}
	return "`" + text + "`"
}

// holdTrace is what each connection ran in the burst the story is told of
// (the first violating burst whose requests met, else the first with an
// account): a line per connection, its transactions in brackets, the held
// statement marked. For the HTML report, where a reader opens the case.
func holdTrace(r *runner.Result) []string {
	var pick *runner.Burst
	for i := range r.Bursts {
		b := &r.Bursts[i]
		if b.Hold == nil {
			continue
		}
		if pick == nil {
			pick = b
		}
		if b.Violated() && !b.Hold.Untested {
			pick = b
			break
		}
	}
	if pick == nil {
		return nil
	}
	var lines []string
	for _, c := range pick.Hold.Conns {
		var txs []string
		for _, tx := range c.Transactions {
			var sts []string
			for _, st := range tx {
				t := st.Text
				if t == "" {
					continue
				}
				if st.Held {
					t += " (held)"
				}
				sts = append(sts, t)
			}
			if len(sts) > 0 {
				txs = append(txs, "["+strings.Join(sts, "; ")+"]")
			}
		}
		lines = append(lines, fmt.Sprintf("burst %d, connection %d: %s", pick.Index, c.Conn, strings.Join(txs, " ")))
	}
	return lines
}
