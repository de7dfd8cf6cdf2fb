package scenarios

import (
	"testing"
	"time"
)

func TestMostHolders(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	for _, c := range []struct {
		gs   []Grant
		want int
	}{
		{nil, 0},
		{[]Grant{{at(0), at(50)}}, 1},
		{[]Grant{{at(0), at(50)}, {at(50), at(100)}}, 1}, // the next holder after expiry
		{[]Grant{{at(0), at(50)}, {at(10), at(60)}}, 2},  // two holders at once
		{[]Grant{{at(0), at(50)}, {at(10), at(60)}, {at(20), at(30)}, {at(70), at(80)}}, 3},
	} {
		if got := MostHolders(c.gs); got != c.want {
			t.Errorf("MostHolders(%v) = %d, want %d", c.gs, got, c.want)
		}
	}
}
