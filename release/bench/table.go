package bench

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// Print writes the report as tables, then the goals and how each was met.
func (r *Report) Print(w io.Writer) {
	cfg := r.Config
	fmt.Fprintf(w, "racetest bench — release modes on the same servers, interleaved in chunks of %d bursts (%s)\n",
		cfg.Chunk, r.Elapsed.Round(time.Second))
	var servers []string
	for _, b := range cfg.Backends {
		if s := r.Servers[b]; s != "" {
			servers = append(servers, b+": "+s)
		}
	}
	fmt.Fprintf(w, "servers: %s\n", strings.Join(servers, ", "))
	if r.LoadBefore != "" {
		fmt.Fprintf(w, "machine: %d CPUs, load average %s before and %s after\n", r.CPUs, r.LoadBefore, r.LoadAfter)
	}
	for _, b := range sortedKeys(r.Skipped) {
		fmt.Fprintf(w, "skipped %s: %s\n", b, r.Skipped[b])
	}

	fmt.Fprintf(w, "\ncheck-then-write, no injected gap: the share of bursts that exposed the race (more than one write)\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "BACKEND\tSCENARIO\tN\tMODE\tBURSTS\tSPREAD med\tOVERLAP med\tARRIVAL med\tEXPOSED\tNOT SYNCED\tERRORS")
	for _, row := range r.Rows {
		synced := "-"
		if row.Mode == LastByte {
			synced = fmt.Sprintf("%d/%d", row.Wire.Late, row.Wire.Held+row.Wire.Late+row.Wire.Silent)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%s\t%d/%d\t%s\t%s\t%s\t%d\n",
			row.Backend, row.Scenario, row.N, row.Mode, row.Bursts, us(row.Spread), row.Overlap, row.N,
			us(row.Arrival), pct(row.Exposed, row.Bursts), synced, row.Errors)
	}
	tw.Flush()
	fmt.Fprintln(w, `  SPREAD: first to last attempt released, client-side (naive: goroutine starts; gate: gate open to
          each worker running; last-byte: each held write returned, an upper bound). OVERLAP: most attempts in
          flight at once. ARRIVAL: first to last arrival by the server's clock (MySQL NOW(6), PostgreSQL
          statement_timestamp(), Redis TIME), measured on the calibration target at the same N and mode.
          NOT SYNCED: last-byte attempts whose request missed the release and went out late.`)

	if len(r.Resolutions) > 0 {
		fmt.Fprintf(w, "\nresolution at N=2: the share of bursts that expose a check-then-write whose write lands W after\nits check, judged on the server's arrival stamps (exact to the µs)\n")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		head := []string{"BACKEND", "MODE"}
		for _, win := range cfg.Windows {
			head = append(head, "W="+us(win))
		}
		head = append(head, "NARROWEST ≥50%", "ARRIVAL GAP med")
		fmt.Fprintln(tw, strings.Join(head, "\t"))
		for _, res := range r.Resolutions {
			cols := []string{res.Backend, res.Mode}
			for i := range cfg.Windows {
				cols = append(cols, pct(res.Exposed[i], res.Bursts[i]))
			}
			narrow := "none"
			if res.Narrowest >= 0 {
				narrow = us(res.Narrowest)
			}
			cols = append(cols, narrow, us(res.Gap))
			fmt.Fprintln(tw, strings.Join(cols, "\t"))
		}
		tw.Flush()
		fmt.Fprintf(w, "  Every burst is judged at every W (%d bursts per mode). ARRIVAL GAP: median gap between the two arrivals.\n", cfg.Bursts)
	}

	fmt.Fprintf(w, "\ngoals\n")
	for _, g := range r.Goals() {
		mark := "met"
		if !g.Met {
			mark = "NOT MET"
		}
		fmt.Fprintf(w, "  %-7s  %s\n", mark, g.Text)
	}
}

// Goal is one of the goals, judged on this run.
type Goal struct {
	Met  bool
	Text string
}

// Goals judges the run against the goals: at N=2 last-byte exposes the
// one-round-trip window in ≥99% of bursts; it never does worse than the gate;
// its resolution is at least twice as fine as the gate's; and (issue 7)
// racetest's gate is never below the naive launcher.
func (r *Report) Goals() []Goal {
	var goals []Goal
	find := func(backend string, n int, mode string) (Row, bool) {
		for _, row := range r.Rows {
			if row.Backend == backend && row.N == n && row.Mode == mode {
				return row, true
			}
		}
		return Row{}, false
	}
	for _, b := range r.Config.Backends {
		if lb, ok := find(b, 2, LastByte); ok {
			s := lb.Share()
			text := fmt.Sprintf("%s N=2: last-byte exposed %s of bursts (goal ≥ 99%%)", b, pct(lb.Exposed, lb.Bursts))
			if s < 0.99 {
				text += fmt.Sprintf(" — short by %.1f points", 100*(0.99-s))
			}
			goals = append(goals, Goal{Met: s >= 0.99, Text: text})
		}
		for _, n := range r.Config.Attempts {
			lb, ok1 := find(b, n, LastByte)
			g, ok2 := find(b, n, Gate)
			nv, ok3 := find(b, n, Naive)
			if ok1 && ok2 {
				d, se := diff(lb, g)
				text := fmt.Sprintf("%s N=%d: last-byte %s vs gate %s", b, n, pct(lb.Exposed, lb.Bursts), pct(g.Exposed, g.Bursts))
				met := d >= 0
				if !met {
					text += fmt.Sprintf(" — worse by %.1f points", -100*d)
					if -d < 2*se {
						text += fmt.Sprintf(" (within noise: 2σ = %.1f points)", 200*se)
					}
				}
				goals = append(goals, Goal{Met: met, Text: text + " (goal: never worse than the gate)"})
			}
			if ok2 && ok3 {
				d, _ := diff(g, nv)
				text := fmt.Sprintf("%s N=%d: gate %s vs naive launcher %s (goal: never below naive)", b, n, pct(g.Exposed, g.Bursts), pct(nv.Exposed, nv.Bursts))
				goals = append(goals, Goal{Met: d >= 0, Text: text})
			}
		}
		var lbRes, gRes *Resolution
		for i := range r.Resolutions {
			res := &r.Resolutions[i]
			if res.Backend == b && res.Mode == LastByte {
				lbRes = res
			}
			if res.Backend == b && res.Mode == Gate {
				gRes = res
			}
		}
		if lbRes != nil && gRes != nil {
			goals = append(goals, resolutionGoal(b, lbRes.Narrowest, gRes.Narrowest, r.Config.Windows))
		}
	}
	return goals
}

func resolutionGoal(backend string, lb, gate time.Duration, windows []time.Duration) Goal {
	widest := windows[len(windows)-1]
	desc := func(d time.Duration) string {
		if d < 0 {
			return "none up to " + us(widest)
		}
		return us(d)
	}
	text := fmt.Sprintf("%s resolution: last-byte %s, gate %s (goal: at least twice as fine)", backend, desc(lb), desc(gate))
	switch {
	case lb < 0:
		return Goal{Met: false, Text: text}
	case gate < 0:
		return Goal{Met: true, Text: text}
	case lb == 0:
		return Goal{Met: true, Text: text + " — last-byte exposes even the narrowest window measured"}
	case 2*lb <= gate:
		return Goal{Met: true, Text: text + fmt.Sprintf(" — %.1f× finer", float64(gate)/float64(lb))}
	}
	ratio := float64(gate) / float64(lb)
	return Goal{Met: false, Text: text + fmt.Sprintf(" — only %.1f× finer", ratio)}
}

// diff is a's share minus b's, and its standard error.
func diff(a, b Row) (d, se float64) {
	pa, pb := a.Share(), b.Share()
	v := 0.0
	if a.Bursts > 0 {
		v += pa * (1 - pa) / float64(a.Bursts)
	}
	if b.Bursts > 0 {
		v += pb * (1 - pb) / float64(b.Bursts)
	}
	return pa - pb, math.Sqrt(v)
}

func pct(k, n int) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(k)/float64(n))
}

// us prints a duration in µs (or ms from 10 ms up); negative means unknown.
func us(d time.Duration) string {
	switch {
	case d < 0:
		return "-"
	case d >= 10*time.Millisecond:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	case d >= 100*time.Microsecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	}
	return fmt.Sprintf("%.1fµs", float64(d)/float64(time.Microsecond))
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
