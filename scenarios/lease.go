package scenarios

import "time"

// Grant is one grant of a lease, valid from From until (not including) Until.
type Grant struct{ From, Until time.Time }

// MostHolders is the most grants valid at one instant: more than one means
// two holders at once, the violation of a lease. It is the effect count of
// ttl-lease on every backend that keeps its grants as time intervals.
func MostHolders(gs []Grant) int {
	most := 0
	for _, g := range gs {
		n := 0
		for _, h := range gs {
			if !h.From.After(g.From) && h.Until.After(g.From) {
				n++
			}
		}
		most = max(most, n)
	}
	return most
}
