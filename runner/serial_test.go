package runner

import (
	"context"
	"testing"
	"time"
)

// A burst the server served one request at a time tested nothing, however
// much its attempts overlapped at the client; an unmeasured one (0) is
// judged as before.
func TestSerialBursts(t *testing.T) {
	answered := [NumClasses]int{Executed: 1, Declined: 3}
	for _, tc := range []struct {
		parallelism    float64
		serial, tested bool
	}{
		{0, false, true}, // not measured
		{0.4, true, false},
		{1, true, false},
		{SerialBelow - 0.01, true, false},
		{SerialBelow, false, true},
		{2, false, true},
		{16, false, true},
	} {
		b := Burst{Effects: 1, Overlap: 4, Outcomes: answered, ServerParallelism: tc.parallelism}
		if b.Serial() != tc.serial || b.Tested() != tc.tested {
			t.Errorf("parallelism %.2f: serial %v, tested %v; want %v and %v", tc.parallelism, b.Serial(), b.Tested(), tc.serial, tc.tested)
		}
	}
	r := &Result{Bursts: []Burst{{ServerParallelism: 1}, {ServerParallelism: 4}, {}, {ServerParallelism: 1.2}}}
	if r.Serial() != 2 {
		t.Errorf("result serial %d, want 2", r.Serial())
	}
}

// A burst answered one request at a time while a session of the database
// waited on a lock was queued by that lock: it ran together as far as the
// database, and tested the guard. A lock wait in a burst answered at once
// changes nothing.
func TestLockSerializedBursts(t *testing.T) {
	answered := [NumClasses]int{Executed: 1, Declined: 3}
	for _, tc := range []struct {
		parallelism                    float64
		waited, serial, queued, tested bool
	}{
		{1, true, false, true, true},
		{1, false, true, false, false},
		{SerialBelow - 0.01, true, false, true, true},
		{SerialBelow, true, false, false, true},
		{0, true, false, false, true}, // not measured
		{3, false, false, false, true},
	} {
		b := Burst{Effects: 1, Overlap: 4, Outcomes: answered, ServerParallelism: tc.parallelism, LockWaited: tc.waited}
		if b.Serial() != tc.serial || b.LockSerialized() != tc.queued || b.Tested() != tc.tested {
			t.Errorf("parallelism %.2f, lock waited %v: serial %v, queued by a lock %v, tested %v; want %v, %v, %v",
				tc.parallelism, tc.waited, b.Serial(), b.LockSerialized(), b.Tested(), tc.serial, tc.queued, tc.tested)
		}
	}
	r := &Result{Bursts: []Burst{{ServerParallelism: 1, LockWaited: true}, {ServerParallelism: 1}, {ServerParallelism: 4, LockWaited: true}, {ServerParallelism: 1.2, LockWaited: true}}}
	if r.Serial() != 1 || r.LockSerialized() != 2 {
		t.Errorf("result: %d serial, %d queued by a lock; want 1 and 2", r.Serial(), r.LockSerialized())
	}
}

// lockTarget says the server answered every burst one at a time, and that a
// session waited on a lock during the odd ones.
type lockTarget struct{ parallelTarget }

func (lockTarget) LockWaited(s Subject) bool { return s.Burst%2 == 1 }

// The runner records a LockWaiter's finding on each burst, beside the
// server's parallelism.
func TestLockWaitIsRecorded(t *testing.T) {
	res, err := Run(context.Background(), lockTarget{parallelTarget{newCounter()}}, Attempts(4), Bursts(4))
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range res.Bursts {
		if b.LockWaited != (i%2 == 1) {
			t.Errorf("burst %d: lock waited %v, want %v", i, b.LockWaited, i%2 == 1)
		}
	}
	// Burst 1 was answered at once (6): its wait queued nothing.
	if res.Serial() != 2 || res.LockSerialized() != 1 {
		t.Errorf("%d bursts served one at a time, %d queued by a lock; want 2 and 1", res.Serial(), res.LockSerialized())
	}
}

// parallelTarget says the server handled each burst's attempts 1.25 at a
// time, except burst 1's.
type parallelTarget struct{ *counter }

func (parallelTarget) ServerParallelism(s Subject) float64 {
	if s.Burst == 1 {
		return 6
	}
	return 1.25
}

// The runner records a ServerParalleler's figure on each burst.
func TestServerParallelismIsRecorded(t *testing.T) {
	res, err := Run(context.Background(), parallelTarget{newCounter()}, Attempts(4), Bursts(3))
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []float64{1.25, 6, 1.25} {
		if got := res.Bursts[i].ServerParallelism; got != want {
			t.Errorf("burst %d: server parallelism %.2f, want %.2f", i, got, want)
		}
	}
	if res.Serial() != 2 {
		t.Errorf("%d bursts served one at a time, want 2", res.Serial())
	}
	// A target that cannot tell leaves it unmeasured.
	res, err = Run(context.Background(), newCounter(), Attempts(4), Bursts(2))
	if err != nil {
		t.Fatal(err)
	}
	if res.Bursts[0].ServerParallelism != 0 || res.Serial() != 0 {
		t.Errorf("without a ServerParalleler: parallelism %.2f, serial %d; want 0 and 0", res.Bursts[0].ServerParallelism, res.Serial())
	}
}

// An accounting run records the server's parallelism too: a one-worker
// server is as serial to it as to a counted run.
func TestServerParallelismIsRecordedUnderAccounting(t *testing.T) {
	res, err := Run(context.Background(), parallelTarget{newCounter()}, Attempts(4), Bursts(3), Accounting(true))
	if err != nil {
		t.Fatal(err)
	}
	if res.Serial() != 2 || res.Bursts[1].ServerParallelism != 6 {
		t.Errorf("under accounting: %d serial bursts, burst 1 at %.2f; want 2 and 6", res.Serial(), res.Bursts[1].ServerParallelism)
	}
}

// A probe's result reads as serial or concurrent only when it found so: a
// run without a probe, or one the probe could not carry out, is neither
// (the bursts' estimates judge it alone).
func TestServerProbeResult(t *testing.T) {
	for _, c := range []struct {
		p                  *ServerProbe
		serial, concurrent bool
	}{
		{nil, false, false},
		{&ServerProbe{Result: ProbeSerial}, true, false},
		{&ServerProbe{Result: ProbeConcurrent}, false, true},
		{&ServerProbe{Result: ProbeNotRun}, false, false},
	} {
		if c.p.Serial() != c.serial || c.p.Concurrent() != c.concurrent {
			t.Errorf("%+v: serial %v, concurrent %v; want %v, %v", c.p, c.p.Serial(), c.p.Concurrent(), c.serial, c.concurrent)
		}
	}
}

// wireTarget sent burst 1's requests itself over 7 s (a figure: nothing waits), and none of burst
// 2's.
type wireTarget struct{ *counter }

func (wireTarget) WireSpread(s Subject) (time.Duration, bool) {
	switch s.Burst {
	case 1:
		return 7 * time.Second, true
	case 2:
		return 0, false
	}
	return 3 * time.Second, true
}

// A WireSpreader's spread is the burst's: when its requests left, not when
// the gate released the workers. Where nothing left, the gate's stays.
func TestWireSpreadIsTheBurstsSpread(t *testing.T) {
	res, err := Run(context.Background(), wireTarget{newCounter()}, Attempts(4), Bursts(3))
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Bursts[0].Spread; got != 3*time.Second {
		t.Errorf("burst 0: spread %v, want the wire's 3s", got)
	}
	if got := res.Bursts[1].Spread; got != 7*time.Second {
		t.Errorf("burst 1: spread %v, want the wire's 7s", got)
	}
	// The gate's spread of 4 in-process workers is far below a second.
	if got := res.Bursts[2].Spread; got >= 3*time.Second {
		t.Errorf("burst 2, nothing sent: spread %v, want the gate's", got)
	}
	if got := res.SpreadSummary().Median; got != 3*time.Second {
		t.Errorf("median spread %v, want 3s", got)
	}
	// Two waves a burst: the first to the last request leaving would span
	// both; the gates' spread stays.
	res, err = Run(context.Background(), wireTarget{newCounter()}, Attempts(4), Bursts(2), Waves(2))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range res.Bursts {
		if b.Spread >= 3*time.Second {
			t.Errorf("burst %d of two waves: spread %v, want the gates'", b.Index, b.Spread)
		}
	}
}
