package explore

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/racetest/racetest/runner"
)

// Keys split a table: two writes of different keys commute, of one key
// (or of the whole table, key "") they do not; two reads never conflict.
func TestAccessConflictsByKey(t *testing.T) {
	w := func(table, key string) Access { return Access{Table: table, Key: key, Write: true} }
	for _, c := range []struct {
		a, b Access
		want bool
	}{
		{w("t", "k1"), w("t", "k2"), false},
		{w("t", "k1"), w("t", "k1"), true},
		{w("t", "k1"), w("t", ""), true},
		{w("t", ""), w("t", "k1"), true},
		{w("t", "k1"), w("u", "k1"), false},
		{w("*", "k1"), w("u", "k1"), true},
		{Access{Table: "t", Key: "k1"}, Access{Table: "t", Key: "k1"}, false},
	} {
		if got := c.a.conflicts(c.b); got != c.want {
			t.Errorf("%+v against %+v: conflicts %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

// A step that may touch anything commutes with nothing, on either side.
func TestByAccessAllCommutesWithNothing(t *testing.T) {
	fp := map[string]Footprint{
		"all":  {All: true},
		"read": {Accesses: []Access{{Table: "t"}}},
		"othr": {Accesses: []Access{{Table: "u"}}},
	}
	ind := ByAccess(func(_ int, name string) Footprint { return fp[name] })
	if ind(StepRef{Attempt: 0, Name: "all"}, StepRef{Attempt: 1, Name: "read"}) || ind(StepRef{Attempt: 0, Name: "read"}, StepRef{Attempt: 1, Name: "all"}) {
		t.Error("a step that may touch anything commutes with a read")
	}
	if !ind(StepRef{Attempt: 0, Name: "read"}, StepRef{Attempt: 1, Name: "othr"}) {
		t.Error("reads of two tables do not commute")
	}
}

// A step that ends no transaction touches what it touches; one that ends
// it touches what every step of the transaction since the last end did,
// and everything if one of them may touch anything.
func TestFootprintOfAnEnd(t *testing.T) {
	fp := map[string]Footprint{
		"w":      {Accesses: []Access{{Table: "t", Write: true}}},
		"all":    {All: true},
		"commit": {Ends: true},
		"read":   {Accesses: []Access{{Table: "u"}}, Fleeting: true},
	}
	of := func(_ int, name string) Footprint { return fp[name] }
	if f := footprint(of, StepRef{Name: "w", Before: []string{"all"}}); f.All || f.Ends || len(f.Accesses) != 1 {
		t.Errorf("a write after an all-step: %+v, want the write's own footprint", f)
	}
	if f := footprint(of, StepRef{Name: "commit", Before: []string{"all", "w"}}); !f.All {
		t.Errorf("a commit of a transaction with an all-step: %+v, want All", f)
	}
	if f := footprint(of, StepRef{Name: "commit", Before: []string{"read", "w"}}); f.All || len(f.Accesses) != 1 || f.Accesses[0].Table != "t" {
		t.Errorf("a commit after a write and a fleeting read: %+v, want the write alone", f)
	}
}

// A SAFE says what held: the effects, the invariants, or both.
func TestSafeSaysWhatHeld(t *testing.T) {
	ok := Order{Effects: 1, Allowed: 1, Required: 1, Attempts: []Attempt{{Outcome: runner.Executed}, {Outcome: runner.Declined}}}
	for _, c := range []struct {
		inv       []string
		uncounted bool
		want, not string
	}{
		{nil, false, "stayed within 1 effect(s)", "invariant"},
		{[]string{"no overdraft"}, true, "kept 1 invariant", "stayed within"},
		{[]string{"no overdraft"}, false, "stayed within 1 effect(s) and kept 1 invariant", "\x00"},
	} {
		r := &Result{Allowed: 1, Required: 1, Orders: []Order{ok}, Invariants: c.inv, Uncounted: c.uncounted}
		if r.Verdict() != Safe {
			t.Fatalf("verdict %s, want SAFE", r.Verdict())
		}
		if why := r.Why(); !strings.Contains(why, c.want) || strings.Contains(why, c.not) {
			t.Errorf("invariants %v, uncounted %v: why %q, want %q", c.inv, c.uncounted, why, c.want)
		}
	}
}

// invStore judges by an invariant alone: at most one effect per subject.
type invStore struct{ *store }

func (invStore) Uncounted() bool      { return true }
func (invStore) Invariants() []string { return []string{"at most one"} }
func (s invStore) Broken(_ context.Context, sub runner.Subject) ([]int, error) {
	return []int{max(0, s.count(sub.Key)-1)}, nil
}

// A target's invariants judge its orders: an order that breaks one is a
// RACE named after it, even with no effects counted.
func TestInvariantsJudgeTheOrders(t *testing.T) {
	res, err := Run(context.Background(), invStore{newStore(naive)}, Options{Attempts: 2, BlockAfter: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Invariants) != 1 || res.Invariants[0] != "at most one" || !res.Uncounted {
		t.Errorf("invariants %q, uncounted %v: want the target's, and uncounted", res.Invariants, res.Uncounted)
	}
	if v := res.Verdict(); v != Race {
		t.Errorf("naive attempts judged by 'at most one': %s, want RACE", v)
	}
	if why := res.Why(); !strings.Contains(why, "orders broke the invariant at most one") || strings.Contains(why, "left more than") {
		t.Errorf("why %q: want the invariant named, and no effects (none are counted)", why)
	}
	held, serial := 0, 0
	for _, o := range res.Orders {
		if !o.BrokeInvariant() {
			held++
		}
		// A1 A2 first: B checks after A's act, and declines.
		if strings.HasPrefix(o.Schedule, "A1 A2") {
			serial++
			if o.BrokeInvariant() {
				t.Errorf("order %s, A before B, broke the invariant (%v)", o.Schedule, o.Broken)
			}
		}
	}
	if held == 0 || held == len(res.Orders) || serial == 0 {
		t.Errorf("%d of %d orders kept the invariant (%d serial): want some (the check ran after the other's act) and not all", held, len(res.Orders), serial)
	}
	if want := fmt.Sprintf("%d of %d orders broke the invariant at most one", len(res.Orders)-held, len(res.Orders)); !strings.Contains(res.Why(), want) {
		t.Errorf("why %q, want %q", res.Why(), want)
	}
}

// heldStore counts effects and has an invariant that always holds: a RACE
// by its effects says nothing of the invariant.
type heldStore struct{ *store }

func (heldStore) Invariants() []string { return []string{"always"} }
func (heldStore) Broken(context.Context, runner.Subject) ([]int, error) {
	return []int{0}, nil
}

func TestARaceByEffectsNamesNoInvariantThatHeld(t *testing.T) {
	res, err := Run(context.Background(), heldStore{newStore(naive)}, Options{Attempts: 2, BlockAfter: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if why := res.Why(); res.Verdict() != Race || !strings.Contains(why, "left more than 1 effect(s)") || strings.Contains(why, "invariant") {
		t.Errorf("verdict %s, why %q: want RACE by effects, no invariant named", res.Verdict(), why)
	}
}

func TestPlural(t *testing.T) {
	if plural(1, "invariant") != "1 invariant" || plural(2, "invariant") != "2 invariants" || plural(0, "order") != "0 orders" {
		t.Error("plural")
	}
}

// The steps a run shows are the first attempt's of the longest plan.
func TestSetStepsKeepsTheFirstLongest(t *testing.T) {
	var r Result
	r.setSteps([][]string{{"A1"}, {"B1", "B2"}, {"C1", "C2"}})
	if strings.Join(r.Steps, " ") != "B1 B2" || len(r.AttemptSteps) != 3 {
		t.Errorf("steps %v of %v", r.Steps, r.AttemptSteps)
	}
}

// oldStore's invariant was broken before any order (one old violation),
// and locked attempts add none: an order is judged by what it adds.
type oldStore struct{ *store }

func (oldStore) Uncounted() bool      { return true }
func (oldStore) Invariants() []string { return []string{"at most one, and one old"} }
func (s oldStore) Broken(_ context.Context, sub runner.Subject) ([]int, error) {
	return []int{1 + max(0, s.count(sub.Key)-1)}, nil
}

func TestAnOrderIsJudgedByTheViolationsItAdds(t *testing.T) {
	res, err := Run(context.Background(), oldStore{newStore(locked)}, Options{Attempts: 2, BlockAfter: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range res.Orders {
		if o.BrokeInvariant() {
			t.Errorf("order %s broke the invariant (%v): the old violation is not the order's", o.Schedule, o.Broken)
		}
	}
	if v := res.Verdict(); v == Race {
		t.Errorf("verdict RACE (%s): the old violation is not the orders'", res.Why())
	}
}

// badStore answers one count for its invariant before an order, and two
// after it.
type badStore struct {
	invStore
	calls *atomic.Int64
}

func (b badStore) Broken(context.Context, runner.Subject) ([]int, error) {
	if b.calls.Add(1)%2 == 0 {
		return []int{0, 0}, nil
	}
	return []int{0}, nil
}

func TestInvariantCountsMustMatchTheInvariants(t *testing.T) {
	_, err := Run(context.Background(), badStore{invStore{newStore(naive)}, new(atomic.Int64)}, Options{Attempts: 2, BlockAfter: time.Second})
	if err == nil || !strings.Contains(err.Error(), "order 1: check the invariants: 2 counts for 1 invariants") {
		t.Errorf("two counts for one invariant: %v, want refused", err)
	}
}
