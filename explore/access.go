package explore

import "slices"

// Access is one table (or key space) a step reads or writes.
type Access struct {
	Table string // "*": every table
	Key   string // "": every key (row) of Table
	Write bool
}

// conflicts reports whether the two accesses may not be swapped: they
// reach the same table and key, and one of them writes.
func (a Access) conflicts(b Access) bool {
	switch {
	case !a.Write && !b.Write:
		return false
	case a.Table != b.Table && a.Table != "*" && b.Table != "*":
		return false
	}
	return a.Key == "" || b.Key == "" || a.Key == b.Key
}

// Footprint is what one step touches, as its attempt's dialect reads the
// step.
type Footprint struct {
	Accesses []Access
	// All: the step may touch anything (a statement the dialect does not
	// understand, a call of a function that may write): it commutes with
	// nothing.
	All bool
	// Ends: the step ends its attempt's transaction (COMMIT, ROLLBACK;
	// EXEC, DISCARD). It publishes what the transaction wrote and releases
	// what it locked, so it touches everything the transaction touched.
	Ends bool
	// Fleeting: the step holds nothing past itself (a plain read at read
	// committed takes no lock), so the end of its transaction owes it
	// nothing: that end does not touch what this step touched.
	Fleeting bool
}

// ByAccess is the independence relation of steps by what they touch: two
// steps of different attempts commute when no table and key is reached by
// both with one of them writing — then whichever goes first, neither sees
// anything different, and the store ends the same. A step that ends a
// transaction touches what every step of that transaction touched, back
// to the previous end along the path its attempt took alone
// (StepRef.Before): a COMMIT is what makes an UPDATE visible and lets a
// waiting writer of the same row go, so it never commutes with a step on
// that row. An order in which an attempt leaves that path is counted as
// diverged, and a SAFE over pruned orders then does not stand (Run).
//
// It is sound as long as of never leaves out what a step may touch: a
// dialect that cannot tell says All.
func ByAccess(of func(attempt int, name string) Footprint) Independent {
	return func(a, b StepRef) bool {
		fa, fb := footprint(of, a), footprint(of, b)
		if fa.All || fb.All {
			return false
		}
		for _, x := range fa.Accesses {
			for _, y := range fb.Accesses {
				if x.conflicts(y) {
					return false
				}
			}
		}
		return true
	}
}

// footprint is what step s touches, with the whole transaction when it
// ends one.
func footprint(of func(int, string) Footprint, s StepRef) Footprint {
	f := of(s.Attempt, s.Name)
	if !f.Ends || f.All {
		return f
	}
	out := Footprint{Accesses: slices.Clone(f.Accesses), Ends: true}
	for i := len(s.Before) - 1; i >= 0; i-- {
		g := of(s.Attempt, s.Before[i])
		if g.Ends {
			break
		}
		if g.Fleeting {
			continue
		}
		out.All = out.All || g.All
		out.Accesses = append(out.Accesses, g.Accesses...)
	}
	return out
}
