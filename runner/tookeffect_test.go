package runner

import "testing"

// A counted burst took effect when its effects rose: none is not "took
// effect" (kills the >= mutant of TookEffect).
func TestTookEffectOfACountedBurst(t *testing.T) {
	for effects, want := range map[int]bool{0: false, 1: true, 3: true} {
		if got := (Burst{Effects: effects}).TookEffect(); got != want {
			t.Errorf("effects %d: took effect %v, want %v", effects, got, want)
		}
	}
}
