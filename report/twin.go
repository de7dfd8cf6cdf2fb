package report

import (
	"fmt"
	"math/big"
	"strings"

	"github.com/racetest/racetest/runner"
)

// A run judged by solo twins (--effects auto) compares each burst's change
// of the store with the change the same attempts made one at a time: its
// lines say which table and column differ, and show both changes of the
// worst burst side by side.

// twinRun reports whether the run was judged by solo twins.
func twinRun(r *runner.Result) bool { return r != nil && r.Twins != nil }

// worstTwin is the burst to show: the violation with the most differing
// keys, else the first burst that was compared, else the first.
func worstTwin(r *runner.Result) *runner.Burst {
	var worst *runner.Burst
	for i := range r.Bursts {
		b := &r.Bursts[i]
		if b.Twin == nil {
			continue
		}
		if worst == nil {
			worst = b
			continue
		}
		bad, wbad := b.Violated() || b.Lost(), worst.Violated() || worst.Lost()
		if bad && (!wbad || len(b.Twin.Diffs) > len(worst.Twin.Diffs)) {
			worst = b
		} else if !wbad && worst.Twin.Verdict == runner.TwinUnjudged && b.Twin.Verdict != runner.TwinUnjudged {
			worst = b
		}
	}
	return worst
}

// twinSummary is the line that replaces the effects line of a RACE, LOST
// or SAFE run judged by solo twins.
func twinSummary(r *runner.Result, a Assessment) string {
	w := worstTwin(r)
	if w == nil {
		return ""
	}
	var diffs []string
	for _, d := range w.Twin.Diffs {
		diffs = append(diffs, d.String())
	}
	if a.Verdict == Race {
		return fmt.Sprintf("%d of %d bursts changed the database more than the same attempts did one at a time%s; burst %d: %s; 95%% upper bound on the rate %s",
			a.Violations, a.Bursts, ordersTried(r.Twins), w.Index, strings.Join(diffs, "; "), percent(a.Upper))
	}
	if a.Verdict == Lost {
		return fmt.Sprintf("%d of %d bursts changed the database less than the same attempts did one at a time%s, while an attempt claimed it done; burst %d: %s; 95%% upper bound on the rate %s",
			a.Violations, a.Bursts, ordersTried(r.Twins), w.Index, strings.Join(diffs, "; "), percent(a.Upper))
	}
	if a.Verdict == Safe {
		return fmt.Sprintf("0 of %d tested bursts changed the database otherwise than the same attempts one at a time (%s): violation rate ≤%s at 95%%",
			a.Tested, serialsCompared(r.Twins), percent(a.Upper))
	}
	return ""
}

// ordersTried says in how many serial orders the attempts ran, when more
// than one: ", in any of the 4 orders tried".
func ordersTried(tw *runner.Twins) string {
	if tw.Orders <= 1 {
		return ""
	}
	return fmt.Sprintf(", in any of the %d orders tried", tw.Orders)
}

// serialsCompared says what a SAFE run's bursts were compared with: its
// solo twins, its replays, and how many bursts only another order than
// their twin's explains.
func serialsCompared(tw *runner.Twins) string {
	s := plural(tw.Solos, "solo twin") + " compared"
	if tw.Replays > 0 {
		s += fmt.Sprintf(", and %s of a burst in the order its attempts completed", plural(tw.Replays, "replay"))
	}
	if tw.Reordered > 0 {
		s += fmt.Sprintf("; %s equal to another serial order than their solo twin's (the outcome depends on the order of the requests)", plural(tw.Reordered, "burst"))
	}
	return s
}

// twinNotes are the lines every run judged by solo twins shows: what was
// set aside, and how many twins ran.
func twinNotes(r *runner.Result) []string {
	var lines []string
	if len(r.Twins.Varying) > 0 {
		lines = append(lines, fmt.Sprintf("not compared: %s — the sums differ between solo runs in the same order (the value changes with every run: a serial id, a timestamp)",
			strings.Join(r.Twins.Varying, ", ")))
	}
	return lines
}

// twinTable is the worst burst's change beside its solo twin's, one key a
// line, for the table report and the HTML page.
func twinTable(r *runner.Result) []string {
	w := worstTwin(r)
	if w == nil {
		return nil
	}
	t := w.Twin
	ref, replayed := t.Reference()
	keys := unionKeys(ref, t.Together)
	if len(keys) == 0 {
		return nil
	}
	head := fmt.Sprintf("burst %d beside its solo twin (the same %d attempts one at a time, before burst %d):", w.Index, r.Attempts, t.SoloBurst)
	if replayed {
		head = fmt.Sprintf("burst %d beside its replay (the same %d attempts one at a time, in the order they completed together: %s):", w.Index, r.Attempts, workerOrder(t.Replays[0].Order))
	}
	rows := [][3]string{{"what changed", "solo", "together"}}
	mark := map[string]string{}
	for _, d := range t.Diffs {
		mark[d.Key] = "  ← differs"
	}
	for _, k := range r.Twins.Varying {
		mark[k] = "  (not compared)"
	}
	for _, k := range keys {
		name := k
		if tb, ok := strings.CutSuffix(k, runner.RowsSuffix); ok {
			name = tb + " (rows)"
		} else {
			name = k + " (sum)"
		}
		rows = append(rows, [3]string{name, runner.Signed(ref[k]), runner.Signed(t.Together[k])})
	}
	var wid [3]int
	for _, row := range rows {
		for i, c := range row {
			wid[i] = max(wid[i], len([]rune(c)))
		}
	}
	lines := []string{head}
	for i, row := range rows {
		l := fmt.Sprintf("  %-*s  %*s  %*s", wid[0], row[0], wid[1], row[1], wid[2], row[2])
		if i > 0 {
			l += mark[keys[i-1]]
		}
		lines = append(lines, l)
	}
	return lines
}

// workerOrder reads "3, 1, 0, 2": the workers in the order they ran.
func workerOrder(o []int) string {
	s := make([]string, len(o))
	for i, w := range o {
		s[i] = fmt.Sprint(w)
	}
	return strings.Join(s, ", ")
}

func unionKeys(a, b runner.Delta) []string {
	m := runner.Delta{}
	for k, v := range a {
		m[k] = v
	}
	for k, v := range b {
		m[k] = v
	}
	return m.Keys()
}

// TwinsJSON is what a run's solo twins showed as a whole.
type TwinsJSON struct {
	Solos     int      `json:"solos"`
	Replays   int      `json:"replays,omitempty"`
	Orders    int      `json:"orders,omitempty"`
	Reordered int      `json:"reordered_bursts,omitempty"`
	Disagree  string   `json:"disagree,omitempty"`
	Varying   []string `json:"not_compared,omitempty"`
	Noisy     int      `json:"noisy_bursts,omitempty"`
	Noise     string   `json:"noise,omitempty"`
	Turned    int      `json:"turned_bursts,omitempty"`
}

// TwinJSON is one burst's change beside its solo twin's: each key
// ("grants rows", "accounts.balance") to its signed change ("+7").
type TwinJSON struct {
	SoloBurst int               `json:"solo_burst"`
	Verdict   string            `json:"verdict"`
	Solo      map[string]string `json:"solo"`
	SoloOrder []int             `json:"solo_order,omitempty"`
	// SoloExecuted is how many of the solo twin's attempts executed.
	SoloExecuted int               `json:"solo_executed,omitempty"`
	Together     map[string]string `json:"together"`
	// Replays are the burst's attempts one at a time in the order they
	// completed together (and with a near tie swapped), when its change
	// equalled no serial run before it; Differ is against the first.
	Replays   []SerialJSON `json:"replays,omitempty"`
	Reordered bool         `json:"reordered,omitempty"`
	Turned    bool         `json:"turned,omitempty"`
	Differ    []string     `json:"differ,omitempty"`
	Noise     []string     `json:"noise,omitempty"`
}

// SerialJSON is one serial run: the workers in the order they ran, and the
// change they made.
type SerialJSON struct {
	Order    []int             `json:"order"`
	Change   map[string]string `json:"change"`
	Executed int               `json:"executed,omitempty"`
}

func twinsJSON(t *runner.Twins) *TwinsJSON {
	if t == nil {
		return nil
	}
	return &TwinsJSON{Solos: t.Solos, Replays: t.Replays, Orders: t.Orders, Reordered: t.Reordered, Disagree: t.Disagree, Varying: t.Varying, Noisy: t.Noisy, Noise: t.Noise, Turned: t.Turned}
}

func (j *TwinsJSON) twins() *runner.Twins {
	if j == nil {
		return nil
	}
	return &runner.Twins{Solos: j.Solos, Replays: j.Replays, Orders: j.Orders, Reordered: j.Reordered, Disagree: j.Disagree, Varying: j.Varying, Noisy: j.Noisy, Noise: j.Noise, Turned: j.Turned}
}

func twinJSON(t *runner.Twin) *TwinJSON {
	if t == nil {
		return nil
	}
	j := &TwinJSON{SoloBurst: t.SoloBurst, Verdict: t.Verdict.String(), Solo: signedMap(t.Solo), SoloOrder: t.SoloOrder, SoloExecuted: t.SoloExecuted,
		Together: signedMap(t.Together), Reordered: t.Reordered, Turned: t.Turned, Noise: t.Noise}
	for _, sr := range t.Replays {
		j.Replays = append(j.Replays, SerialJSON{Order: sr.Order, Change: signedMap(sr.Delta), Executed: sr.Executed})
	}
	for _, d := range t.Diffs {
		j.Differ = append(j.Differ, d.Key)
	}
	return j
}

func signedMap(d runner.Delta) map[string]string {
	m := map[string]string{}
	for k, v := range d {
		m[k] = v.RatString()
	}
	return m
}

func (j *TwinJSON) twin() (*runner.Twin, error) {
	if j == nil {
		return nil, nil
	}
	t := &runner.Twin{SoloBurst: j.SoloBurst, SoloOrder: j.SoloOrder, SoloExecuted: j.SoloExecuted, Reordered: j.Reordered, Turned: j.Turned, Noise: j.Noise}
	var err error
	if t.Solo, err = deltaOf(j.Solo); err != nil {
		return nil, err
	}
	if t.Together, err = deltaOf(j.Together); err != nil {
		return nil, err
	}
	for _, sj := range j.Replays {
		d, err := deltaOf(sj.Change)
		if err != nil {
			return nil, err
		}
		t.Replays = append(t.Replays, runner.Serial{Order: sj.Order, Delta: d, Executed: sj.Executed})
	}
	ref, _ := t.Reference()
	v, ok := twinVerdicts[j.Verdict]
	if !ok {
		return nil, fmt.Errorf("unknown twin verdict %q", j.Verdict)
	}
	t.Verdict = v
	for _, k := range j.Differ {
		t.Diffs = append(t.Diffs, runner.TwinDiff{Key: k, Solo: orZero(ref[k]), Together: orZero(t.Together[k])})
	}
	return t, nil
}

var twinVerdicts = map[string]runner.TwinVerdict{
	runner.TwinUnjudged.String(): runner.TwinUnjudged, runner.TwinSame.String(): runner.TwinSame,
	runner.TwinMore.String(): runner.TwinMore, runner.TwinFewer.String(): runner.TwinFewer,
}

func deltaOf(m map[string]string) (runner.Delta, error) {
	d := runner.Delta{}
	for k, s := range m {
		r, ok := new(big.Rat).SetString(s)
		if !ok {
			return nil, fmt.Errorf("%s: %q is not a number", k, s)
		}
		d[k] = r
	}
	return d, nil
}

func orZero(r *big.Rat) *big.Rat {
	if r == nil {
		return new(big.Rat)
	}
	return r
}

// twinUnmet says why a run judged by solo twins failed its expectation of
// SAFE.
func twinUnmet(a Assessment) string {
	more := "more"
	if a.Verdict == Lost {
		more = "less"
	}
	return fmt.Sprintf("expected SAFE, but %d of %d bursts changed the database %s than the same attempts did one at a time", a.Violations, a.Bursts, more)
}

// twinCells are the EFFECTS and ALLOWED cells of a run judged by solo
// twins: no count stands for a burst's effects there; each burst's change
// must equal its solo twin's.
func twinCells() (effects, allowed string) { return "auto", "=solo" }
