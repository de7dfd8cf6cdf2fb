package report

import (
	"encoding/json"
	"io"
	"sort"
	"time"

	"github.com/racetest/racetest/runner"
)

// SchemaVersion names the JSON document's schema. It changes only when a
// field is removed or changes meaning; new fields may appear within a version.
const SchemaVersion = "racetest/v1"

// Document is the JSON report: every figure of the table is in it.
type Document struct {
	Schema  string    `json:"schema"`
	Version string    `json:"racetest_version"`
	Title   string    `json:"title,omitempty"`
	Runs    []RunJSON `json:"runs"`
	// Matrix is set by 'racetest matrix': per backend, its runs laid out
	// by scenario and variant (rows) and isolation level (columns).
	Matrix []MatrixJSON `json:"matrix,omitempty"`
	// Shard is set by 'racetest suite --shard K/N': which part of which
	// suite the runs are, so that 'report merge' can tell a whole set of
	// parts from one with a part missing.
	Shard *ShardJSON `json:"shard,omitempty"`
}

// ShardJSON is part K of N of a suite run.
type ShardJSON struct {
	// Suite is the suite's file as the command named it, for messages.
	Suite string `json:"suite"`
	// Digest identifies the suite's text and the cases it was split into
	// (their names and backends, in order): parts of one suite share it.
	Digest string `json:"digest"`
	K      int    `json:"k"`
	N      int    `json:"of"`
	// Cases is how many cases this part holds; a report with fewer runs
	// was cut short.
	Cases int `json:"cases"`
}

// MatrixJSON is one backend's table of a matrix.
type MatrixJSON struct {
	Backend    string          `json:"backend"`
	Server     string          `json:"server,omitempty"`
	Settings   []string        `json:"settings,omitempty"`
	Isolations []string        `json:"isolations"`
	Rows       []MatrixRowJSON `json:"rows"`
}

// MatrixRowJSON is one scenario and variant ("" the default), with one
// cell per isolation level, in the order of Isolations.
type MatrixRowJSON struct {
	Scenario string           `json:"scenario"`
	Variant  string           `json:"variant"`
	Cells    []MatrixCellJSON `json:"cells"`
}

// MatrixCellJSON is one run of a matrix: its verdict, the catalog's
// expectation for this server, and Run, the run's index in runs (-1 when
// the cell did not run).
type MatrixCellJSON struct {
	Isolation      string  `json:"isolation"`
	Run            int     `json:"run"`
	Verdict        Verdict `json:"verdict,omitempty"`
	Expect         string  `json:"expect,omitempty"`
	ExpectationMet bool    `json:"expectation_met"`
	Violations     int     `json:"violations"`
	Bursts         int     `json:"bursts"`
	UpperBound95   float64 `json:"upper_bound_95"`
	Conflicts      int     `json:"conflicts"`
	Cell           string  `json:"cell,omitempty"`
}

// RunJSON is one case in the JSON report. Durations are in microseconds.
type RunJSON struct {
	Name          string            `json:"name"`
	Scenario      string            `json:"scenario"`
	Backend       string            `json:"backend"`
	Server        string            `json:"server,omitempty"`
	Settings      map[string]string `json:"settings,omitempty"`
	Release       string            `json:"release,omitempty"`
	Attempts      int               `json:"attempts_per_burst"`
	Bursts        int               `json:"bursts"`
	PlannedBursts int               `json:"planned_bursts"`
	Replicas      int               `json:"replicas"`
	Waves         int               `json:"waves"`
	Deploy        bool              `json:"deploy"`
	Allowed       int               `json:"allowed"`
	Required      int               `json:"required"`
	// How the bursts were judged besides the allowance: accounting (each
	// success landed once), effects read as a change (baselined), no
	// effects check (uncounted), and the invariants that had to hold.
	Accounting     bool     `json:"accounting,omitempty"`
	Baselined      bool     `json:"baselined,omitempty"`
	Uncounted      bool     `json:"uncounted,omitempty"`
	Invariants     []string `json:"invariants,omitempty"`
	Expect         string   `json:"expect"`
	Verdict        Verdict  `json:"verdict"`
	ExpectationMet bool     `json:"expectation_met"`
	// Expectation is "met", "unproven" (INCONCLUSIVE: met, proving
	// nothing) or "failed".
	Expectation   string  `json:"expectation"`
	Why           string  `json:"why,omitempty"`
	Violations    int     `json:"violations"`
	ViolationRate float64 `json:"violation_rate"`
	UpperBound95  float64 `json:"upper_bound_95"`
	Overlapped    int     `json:"overlapped_bursts"`
	Tested        int     `json:"tested_bursts"`
	// Unjudged counts the bursts nothing judged (per_burst's unobserved);
	// violation_rate is over the others.
	Unjudged     int   `json:"unjudged_bursts,omitempty"`
	Effects      Stat  `json:"effects"`
	Overlap      Stat  `json:"overlap"`
	SpreadMicros StatF `json:"spread_us"`
	// ServerParallelism is min/median/max over the bursts of how many
	// attempts the server handled at once, estimated from the response
	// times (http; 1 in every burst when ServerProbe found the server
	// serial); SerialBursts counts the bursts it served one at a time,
	// which test nothing. Both are absent when the target cannot tell.
	ServerParallelism *StatF `json:"server_parallelism,omitempty"`
	SerialBursts      int    `json:"serial_bursts,omitempty"`
	// LockSerializedBursts counts the bursts the server answered one at a
	// time while a session of the checked database waited on a lock: the
	// database's lock queued them, and they count as tested.
	LockSerializedBursts int `json:"lock_serialized_bursts,omitempty"`
	// ServerProbe is what a probe found, before the bursts, of the server's
	// ability to answer a second request while a first is unfinished
	// (http): result "concurrent", "serial" or "not run", and what was
	// seen. Absent when the target ran none.
	ServerProbe *runner.ServerProbe `json:"server_probe,omitempty"`
	Outcomes    map[string]int      `json:"outcomes"`
	// Retries counts the conflicts retried (run --retry); absent when none.
	Retries       int            `json:"retries,omitempty"`
	Errors        map[string]int `json:"errors,omitempty"`
	Checks        []runner.Check `json:"checks,omitempty"`
	Notes         []string       `json:"notes,omitempty"`
	Interrupted   bool           `json:"interrupted"`
	StoppedEarly  bool           `json:"stopped_early"`
	Error         string         `json:"error,omitempty"`
	CleanupError  string         `json:"cleanup_error,omitempty"`
	ElapsedMillis float64        `json:"elapsed_ms"`
	Example       *TraceJSON     `json:"example,omitempty"`
	// What a saved report needs to be rendered again ('racetest report'):
	// the case's lesson and story, how it was judged, and every burst's
	// figures, from which the HTML draws its histograms.
	Lesson string      `json:"lesson,omitempty"`
	Story  []StoryPart `json:"story,omitempty"`
	Strict bool        `json:"strict,omitempty"`
	// ProveSafe: an expectation of SAFE that INCONCLUSIVE does not meet
	// (report.Case.ProveSafe).
	ProveSafe bool `json:"prove_safe,omitempty"`
	// Command runs the case again (report.Case.Command).
	Command  string      `json:"command,omitempty"`
	Prove    float64     `json:"prove,omitempty"`
	PerBurst []BurstJSON `json:"per_burst,omitempty"`
	// Diagnosis is the target's account of why nothing took effect, and
	// TimeoutMillis the per-attempt timeout: both explain an INCONCLUSIVE.
	Diagnosis     string  `json:"diagnosis,omitempty"`
	TimeoutMillis float64 `json:"timeout_ms,omitempty"`
	// Twins is set in a run judged by solo twins (--effects auto).
	Twins *TwinsJSON `json:"solo_twins,omitempty"`
}

// BurstJSON is one burst's figures. Outcomes leaves out the classes no
// attempt of the burst had.
type BurstJSON struct {
	Index    int `json:"index"`
	Effects  int `json:"effects"`
	Allowed  int `json:"allowed"`
	Required int `json:"required"`
	// Before is what the effects check read before a baselined burst, and
	// Broken the violations it added to each invariant.
	Before int   `json:"before,omitempty"`
	Broken []int `json:"broken,omitempty"`
	// Unjudged marks each invariant that was already broken before the
	// burst and so did not judge it; Unobserved, a burst that nothing
	// judged (no effects check, every invariant unjudged): not tested.
	Unjudged   []bool         `json:"unjudged,omitempty"`
	Unobserved bool           `json:"unobserved,omitempty"`
	Overlap    int            `json:"overlap"`
	Spread     float64        `json:"spread_us"`
	Duration   float64        `json:"duration_us"`
	Outcomes   map[string]int `json:"outcomes"`
	Retries    int            `json:"retries,omitempty"`
	Wire       *WireJSON      `json:"wire,omitempty"`
	// Twin is the burst's change of the store beside its solo twin's
	// (--effects auto).
	Twin *TwinJSON `json:"twin,omitempty"`
	// ServerParallelism is runner.Burst's: 0 (absent) when not measured.
	ServerParallelism float64 `json:"server_parallelism,omitempty"`
	// LockWaited: a session of the checked database waited on a lock
	// while the burst was in flight.
	LockWaited bool `json:"lock_waited,omitempty"`
	// Hold is a database proxy's account of the burst (http --proxy):
	// how many requests met at its hold point, and each connection's
	// statements by transaction.
	Hold *runner.Hold `json:"hold,omitempty"`
}

// WireJSON counts, in a wire release, how a burst's first requests left the
// client: held back and released together, late, or never sent.
type WireJSON struct {
	Held   int `json:"held"`
	Late   int `json:"late"`
	Silent int `json:"silent"`
}

// Stat is min/median/max of a count per burst.
type Stat struct {
	Min    int `json:"min"`
	Median int `json:"median"`
	Max    int `json:"max"`
}

// StatF is min/median/max of a duration per burst, in microseconds.
type StatF struct {
	Min    float64 `json:"min"`
	Median float64 `json:"median"`
	Max    float64 `json:"max"`
}

// TraceJSON is the example burst: the one with the most effects.
type TraceJSON struct {
	Burst   int          `json:"burst"`
	Effects int          `json:"effects"`
	Allowed int          `json:"allowed"`
	Twin    bool         `json:"twin,omitempty"`
	Workers []WorkerJSON `json:"workers"`
}

// WorkerJSON is one attempt of the example burst.
type WorkerJSON struct {
	Worker  int        `json:"worker"`
	Replica int        `json:"replica"`
	Wave    int        `json:"wave"`
	Outcome string     `json:"outcome"`
	Error   string     `json:"error,omitempty"`
	Marks   []MarkJSON `json:"marks"`
}

// MarkJSON is one mark, in microseconds since the gate opened.
type MarkJSON struct {
	Name string  `json:"name"`
	At   float64 `json:"at_us"`
}

func micros(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// NewDocument builds the JSON document for cases.
func NewDocument(cases []Case, version string) Document {
	return newDocument(cases, Options{Version: version})
}

func newDocument(cases []Case, o Options) Document {
	doc := Document{Schema: SchemaVersion, Version: o.Version, Title: o.Title, Shard: o.Shard, Runs: make([]RunJSON, 0, len(cases))}
	for _, c := range cases {
		doc.Runs = append(doc.Runs, runJSON(c))
	}
	if o.Matrix {
		doc.Matrix = matrixJSON(cases)
	}
	return doc
}

func runJSON(c Case) RunJSON {
	a := Assess(c)
	j := RunJSON{
		Name: displayName(c), Scenario: c.Scenario, Backend: c.Backend, Settings: c.Settings, Release: c.Release,
		Expect: c.Expect.String(), Verdict: a.Verdict, ExpectationMet: a.Met, Expectation: a.Expectation(), Why: a.Why,
		Violations: a.Violations, ViolationRate: a.Rate, UpperBound95: a.Upper, Overlapped: a.Overlapped, Tested: a.Tested, Unjudged: a.Unjudged,
		Bursts: a.Bursts, Interrupted: a.Interrupted, Outcomes: map[string]int{},
		Lesson: c.Lesson, Story: c.Story, Strict: c.Strict, ProveSafe: c.ProveSafe, Prove: c.Prove, Command: c.Command,
	}
	if c.Err != nil {
		j.Error = c.Err.Error()
	}
	r := c.Result
	if r == nil {
		return j
	}
	j.Server, j.Attempts, j.PlannedBursts, j.Replicas = r.Server, r.Attempts, r.Planned, r.Replicas
	j.Waves, j.Deploy, j.Allowed, j.Required = r.Waves, r.Deploy, r.Allowed, r.Required
	j.Accounting, j.Baselined, j.Uncounted, j.Invariants = r.Accounting, r.Baselined, r.Uncounted, r.Invariants
	e, o, s := r.EffectsSummary(), r.OverlapSummary(), r.SpreadSummary()
	j.Effects = Stat{e.Min, e.Median, e.Max}
	j.Overlap = Stat{o.Min, o.Median, o.Max}
	j.SpreadMicros = StatF{micros(s.Min), micros(s.Median), micros(s.Max)}
	j.ServerParallelism, j.SerialBursts, j.ServerProbe = serverParallelism(r), r.Serial(), r.ServerProbe
	j.LockSerializedBursts = r.LockSerialized()
	out := r.Outcomes()
	for _, cl := range runner.Classes() {
		j.Outcomes[cl.String()] = out[cl]
	}
	if len(r.Errors) > 0 {
		j.Errors = r.Errors
	}
	j.Retries = r.Retries()
	j.Checks, j.Notes, j.StoppedEarly = r.Checks, r.Notes, r.Stopped
	if r.CleanupErr != nil {
		j.CleanupError = r.CleanupErr.Error()
	}
	j.ElapsedMillis = micros(r.Elapsed) / 1e3
	if t := r.Example; t != nil {
		tj := &TraceJSON{Burst: t.Burst, Effects: t.Effects, Allowed: t.Allowed, Twin: t.Twin}
		for _, w := range t.Workers {
			wj := WorkerJSON{Worker: w.Worker, Replica: w.Replica, Wave: w.Wave, Outcome: w.Outcome.String(), Error: w.Err}
			for _, m := range w.Marks {
				wj.Marks = append(wj.Marks, MarkJSON{m.Name, micros(m.At)})
			}
			tj.Workers = append(tj.Workers, wj)
		}
		j.Example = tj
	}
	j.Diagnosis, j.TimeoutMillis = r.Diagnosis, micros(r.Timeout)/1e3
	j.Twins = twinsJSON(r.Twins)
	j.PerBurst = make([]BurstJSON, len(r.Bursts))
	for i, b := range r.Bursts {
		bj := BurstJSON{Index: b.Index, Effects: b.Effects, Allowed: b.Allowed, Required: b.Required, Before: b.Before, Broken: b.Broken, Overlap: b.Overlap,
			Unjudged: b.Unjudged, Unobserved: b.Unobserved, Spread: micros(b.Spread), Duration: micros(b.Duration), Outcomes: map[string]int{}, Retries: b.Retries}
		for _, cl := range runner.Classes() {
			if n := b.Outcomes[cl]; n > 0 {
				bj.Outcomes[cl.String()] = n
			}
		}
		if b.Wire != (runner.WireCounts{}) {
			bj.Wire = &WireJSON{b.Wire.Held, b.Wire.Late, b.Wire.Silent}
		}
		bj.Twin = twinJSON(b.Twin)
		bj.ServerParallelism, bj.LockWaited, bj.Hold = b.ServerParallelism, b.LockWaited, b.Hold
		j.PerBurst[i] = bj
	}
	return j
}

// serverParallelism is min/median/max of the bursts' measured server
// parallelism; nil when no burst measured it.
func serverParallelism(r *runner.Result) *StatF {
	var ps []float64
	for _, b := range r.Bursts {
		if b.ServerParallelism > 0 {
			ps = append(ps, b.ServerParallelism)
		}
	}
	if len(ps) == 0 {
		return nil
	}
	sort.Float64s(ps)
	return &StatF{ps[0], ps[len(ps)/2], ps[len(ps)-1]}
}

// JSON writes the versioned JSON document.
func JSON(w io.Writer, cases []Case, o Options) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(newDocument(cases, o))
}

func matrixJSON(cases []Case) []MatrixJSON {
	var out []MatrixJSON
	for _, t := range Matrix(cases) {
		mj := MatrixJSON{Backend: t.Backend, Server: t.Server, Settings: t.Settings, Isolations: t.Isolations, Rows: []MatrixRowJSON{}}
		for _, r := range t.Rows {
			rj := MatrixRowJSON{Scenario: r.Scenario, Variant: r.Variant}
			for j, i := range r.Cells {
				cell := MatrixCellJSON{Isolation: t.Isolations[j], Run: i}
				if i >= 0 {
					c := cases[i]
					a := Assess(c)
					cell.Verdict, cell.Expect, cell.ExpectationMet = a.Verdict, c.Expect.String(), a.Met
					cell.Violations, cell.Bursts, cell.Conflicts = a.Violations, a.Bursts, Conflicts(c)
					cell.UpperBound95 = a.Upper
					cell.Cell = matrixCell(c, a, conflictsFull)
				}
				rj.Cells = append(rj.Cells, cell)
			}
			mj.Rows = append(mj.Rows, rj)
		}
		out = append(out, mj)
	}
	return out
}
