package explore

import "testing"

// FuzzParseSchedule: replay's --schedule reader never panics, and a
// schedule it accepts is written back by Format as one it reads the same.
// Run it for real with: go test -run '^$' -fuzz '^FuzzParseSchedule$' ./explore
func FuzzParseSchedule(f *testing.F) {
	for _, s := range []string{"A1 B1 A2 B2", "a1,b1,a2,b2", "A1→B1→B2→A2", "A1 A1", "B1 A1 C1", "A0", "A", "", " , ", "Z9", "A1 B1 A2 B2 C1 C2", "é1", "A99999999999999999999"} {
		f.Add(s, uint8(2))
		f.Add(s, uint8(3))
	}
	f.Fuzz(func(t *testing.T, s string, n uint8) {
		attempts := 1 + int(n)%26
		seq, err := ParseSchedule(s, attempts)
		if err != nil {
			return
		}
		for _, w := range seq {
			if w < 0 || w >= attempts {
				t.Fatalf("%q: attempt %d of %d", s, w, attempts)
			}
		}
		again, err := ParseSchedule(Format(seq), attempts)
		if err != nil || Format(again) != Format(seq) {
			t.Fatalf("%q read as %q, which reads back as %q (%v)", s, Format(seq), Format(again), err)
		}
	})
}
