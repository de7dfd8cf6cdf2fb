package httpfire

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
)

func notesTarget(t *testing.T, cfg Config) *Target {
	t.Helper()
	if cfg.URL == "" {
		cfg.Method, cfg.URL = "POST", "http://127.0.0.1:9/buy"
	}
	tg, err := New(cfg, scenarios.Params{Attempts: 2, Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

// Diagnose speaks only when bursts ran, none succeeded and the server gave
// statuses to name (issue 27: each of its three conditions was read with
// && for || in a whole run of httpfire and no test noticed).
func TestDiagnoseOnlyWhenNothingSucceeded(t *testing.T) {
	for _, c := range []struct {
		bursts, said int
		statuses     map[int]int
		want         string
	}{
		{0, 0, map[int]int{409: 2}, ""},
		{2, 1, map[int]int{409: 2}, ""},
		{2, 0, map[int]int{}, ""},
		{2, 0, map[int]int{409: 4}, "no request succeeded: 409 ×4"},
	} {
		tg := notesTarget(t, Config{})
		tg.st.bursts, tg.st.said, tg.st.statuses = c.bursts, c.said, c.statuses
		got := tg.Diagnose()
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%d bursts, %d said success, statuses %v: %q, want %q", c.bursts, c.said, c.statuses, got, c.want)
		}
	}
}

// The late-release note counts bursts in the plural from two on.
func TestLateBurstsAreCountedInTheNotes(t *testing.T) {
	for late, want := range map[int]string{1: "1 burst was released before", 2: "2 bursts were released before", 0: ""} {
		tg := notesTarget(t, Config{})
		tg.st.bursts, tg.st.late = 3, late
		notes := strings.Join(tg.Notes(), "\n")
		if got := strings.Contains(notes, "released before all their attempts were ready"); got != (want != "") || !strings.Contains(notes, want) {
			t.Errorf("%d late bursts: notes\n%s\nwant %q", late, notes, want)
		}
	}
}

// A burst that sent no request is not a server that stopped answering:
// its effects are what it executed (nothing), without an error.
func TestABurstThatSentNothingIsNoError(t *testing.T) {
	tg := notesTarget(t, Config{})
	n, err := tg.Effects(context.Background(), runner.Subject{Data: &burst{}})
	if n != 0 || err != nil {
		t.Errorf("no request sent: %d effects, %v; want 0 and no error", n, err)
	}
}

// The notes' "actually happened" is the effects check's change over the
// burst, what the runner counts, not its reading after it.
func TestHappenedIsTheChangeOverTheBurst(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, 5) }))
	defer srv.Close()
	tg := notesTarget(t, Config{Effects: "http:" + srv.URL + "/count"})
	b := &burst{baseline: 3}
	n, err := tg.Effects(context.Background(), runner.Subject{Data: b})
	if err != nil || n != 5 {
		t.Fatalf("effects %d, %v; want the check's reading, 5", n, err)
	}
	if notes := strings.Join(tg.Notes(), "\n"); !strings.Contains(notes, "actually happened: 2 (median 2 per burst)") {
		t.Errorf("a check reading 3 before and 5 after: notes\n%s\nwant 2 happened", notes)
	}
}

// orderArmer records the order in which a burst arms it.
type orderArmer struct {
	n   int
	log *[]int
}

func (a orderArmer) arm(context.Context, *burst) error { *a.log = append(*a.log, a.n); return nil }
func (a orderArmer) order() int                        { return a.n }
func (a orderArmer) attempts() int                     { return 1 }

// A burst arms its connections in the attempts' order, so the release
// loop writes their held tails in that order too.
func TestABurstArmsInTheAttemptsOrder(t *testing.T) {
	tg := notesTarget(t, Config{})
	var log []int
	for n := range 8 {
		tg.sessions[orderArmer{n, &log}] = struct{}{}
	}
	s, err := tg.reset(context.Background(), 0, true)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(log); got != "[0 1 2 3 4 5 6 7]" {
		t.Errorf("armed in the order %s, want the attempts' 0 to 7", got)
	}
	if b := s.Data.(*burst); b.expected != 8 {
		t.Errorf("expected %d attempts, want 8", b.expected)
	}
}

// Each burst is counted once; the server is named after the first that
// answered; a burst with no parallelism measured adds none.
func TestStatsCountEachBurst(t *testing.T) {
	tg := notesTarget(t, Config{})
	for _, b := range []*burst{{server: "gunicorn/20", proto: "HTTP/1.1"}, {server: "nginx", proto: "HTTP/2.0"}} {
		if _, err := tg.Effects(context.Background(), runner.Subject{Data: b}); err != nil {
			t.Fatal(err)
		}
	}
	if got := tg.Server(); !strings.HasSuffix(got, "(gunicorn/20, HTTP/1.1)") {
		t.Errorf("server %q, want the first burst's (gunicorn/20, HTTP/1.1)", got)
	}
	notes := strings.Join(tg.Notes(), "\n")
	if !strings.Contains(notes, "said success: 0 responses in 2 bursts") {
		t.Errorf("two bursts: notes\n%s", notes)
	}
	for _, absent := range []string{"server parallelism", "client-side release spread", "server arrival spread", "could not be held back"} {
		if strings.Contains(notes, absent) {
			t.Errorf("bursts that measured nothing: notes say %q:\n%s", absent, notes)
		}
	}
}

// The client-side spread is the median and the largest of the bursts',
// named after the release; unsynchronized attempts are counted.
func TestSpreadAndUnsyncNotes(t *testing.T) {
	for _, c := range []struct {
		release Release
		want    string
	}{
		{LastByte, "client-side release spread (first to last request leaving): median 3.0ms, max 4.0ms"},
		{SinglePacket, "client-side release spread (one write per HTTP/2 connection): median 3.0ms, max 4.0ms"},
	} {
		tg := notesTarget(t, Config{})
		tg.c.release = c.release
		tg.st.bursts, tg.st.unsync = 4, 3
		tg.st.client = []time.Duration{4 * time.Millisecond, time.Millisecond, 3 * time.Millisecond, 2 * time.Millisecond}
		notes := strings.Join(tg.Notes(), "\n")
		if !strings.Contains(notes, c.want) || !strings.Contains(notes, "3 attempts could not be held back") {
			t.Errorf("%s: notes\n%s\nwant %q and 3 attempts not held back", c.release, notes, c.want)
		}
	}
	if got := human(1500 * time.Microsecond); got != "1.5ms" {
		t.Errorf("human(1.5ms) = %q", got)
	}
}

// --effects auto's own note (FerretDB's) is added when it has one, and no
// empty line when it has none.
func TestAutoNoteOnlyWhenThereIsOne(t *testing.T) {
	for _, ferret := range []bool{true, false} {
		tg := notesTarget(t, Config{})
		tg.auto = &autoCheck{mongo: "mongodb://127.0.0.1:9/", ferretDB: ferret}
		tg.st.bursts = 1
		notes := tg.Notes()
		if slices.Contains(notes, "") || ferret != strings.Contains(strings.Join(notes, "\n"), "the store is FerretDB") {
			t.Errorf("FerretDB %v: notes %q", ferret, notes)
		}
	}
}

// The runner's first Broken of a burst is the reading taken before its
// requests were armed, not a new one; its second is a new reading.
func TestBrokenBeforeIsTheReadingBeforeArming(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, calls.Add(1)-1) // 0 violations, then 1, then 2
	}))
	defer srv.Close()
	tg := notesTarget(t, Config{Invariants: []string{"http:" + srv.URL + "/violations"}})
	b := &burst{}
	if err := tg.before(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	s := runner.Subject{Data: b}
	first, err := tg.Broken(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	second, err := tg.Broken(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(first, second) != "[0] [1]" {
		t.Errorf("Broken before and after: %v %v, want [0] (read before arming) and [1] (read now)", first, second)
	}
}

// fakeArmer is a connection that arms for a burst, or fails to.
type fakeArmer struct {
	at, n int
	err   error
	armed int
}

func (f *fakeArmer) arm(context.Context, *burst) error { f.armed++; return f.err }
func (f *fakeArmer) order() int                        { return f.at }
func (f *fakeArmer) attempts() int                     { return f.n }

// A burst goes when at least one connection armed; when none did, Reset
// fails with the first connection's error (in worker order), and an input
// error as it is (issue 27: the count of failures and the first error
// were untested).
func TestResetNeedsOneArmedConnection(t *testing.T) {
	refused := errors.New("refused")
	reset := errors.New("reset by peer")
	bad := &InputError{Field: "--header", Err: errors.New("bad header")}
	for _, c := range []struct {
		name string
		errs []error // by worker order
		want string  // "" = the burst goes
	}{
		{"all armed", []error{nil, nil}, ""},
		{"one armed", []error{refused, nil}, ""},
		{"none armed", []error{refused, reset}, "no connection could be made ready for the burst: refused"},
		{"an input error", []error{bad, bad}, "--header: bad header"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tg := notesTarget(t, Config{})
			tg.sessions = map[armer]struct{}{}
			var fakes []*fakeArmer
			for i, err := range c.errs {
				f := &fakeArmer{at: i, n: 2, err: err}
				fakes = append(fakes, f)
				tg.sessions[f] = struct{}{}
			}
			s, err := tg.Reset(context.Background(), 0)
			for _, f := range fakes {
				if f.armed != 1 {
					t.Errorf("connection %d armed %d times, want once", f.at, f.armed)
				}
			}
			if c.want == "" {
				if err != nil {
					t.Fatalf("Reset: %v", err)
				}
				if b := s.Data.(*burst); b.expected != int32(2*len(fakes)) {
					t.Errorf("the burst expects %d attempts, want %d", b.expected, 2*len(fakes))
				}
				return
			}
			if err == nil || err.Error() != c.want {
				t.Fatalf("Reset: %v, want %q", err, c.want)
			}
			if c.errs[0] == bad && !errors.Is(err, bad) {
				t.Errorf("the input error was wrapped: %v", err)
			}
		})
	}
}

// A burst released before all its attempts were ready counts once in the
// notes' figure, one on time not at all.
func TestLateBurstCountsOnce(t *testing.T) {
	var s stats
	s.statuses = map[int]int{}
	on, late := newBurst(Vars{}), newBurst(Vars{})
	late.late.Store(true)
	s.add(on, 0)
	s.add(late, 0)
	s.add(late, 0)
	if s.late != 2 || s.bursts != 3 {
		t.Errorf("%d late of %d bursts, want 2 of 3", s.late, s.bursts)
	}
}
