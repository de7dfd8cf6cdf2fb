package suite

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/racetest/racetest/report"
	"github.com/racetest/racetest/runplan"
)

func plansNamed(names ...string) []Plan {
	ps := make([]Plan, len(names))
	for i, n := range names {
		ps[i] = Plan{Run: runplan.Run{Case: report.Case{Name: n}}}
	}
	return ps
}

func namesOf(ps []Plan) []string {
	var ns []string
	for _, p := range ps {
		ns = append(ns, p.Case.Name)
	}
	return ns
}

// The parts of a suite cover every case exactly once, in the file's order.
func TestShardsPartitionTheSuite(t *testing.T) {
	var names []string
	for i := range 40 {
		names = append(names, fmt.Sprintf("case-%d", i))
	}
	names = append(names, "twin", "twin", "twin") // names need not be unique
	plans := plansNamed(names...)
	for _, n := range []int{1, 2, 3, 7} {
		var all []string
		for k := 1; k <= n; k++ {
			got := namesOf(Shard{K: k, N: n}.Select(plans))
			// In the file's order: each part is a subsequence of the file.
			i := 0
			for _, name := range got {
				for i < len(names) && names[i] != name {
					i++
				}
				if i == len(names) {
					t.Fatalf("%d/%d: %v is not in the file's order", k, n, got)
				}
				i++
			}
			all = append(all, got...)
		}
		slices.Sort(all)
		want := slices.Clone(names)
		slices.Sort(want)
		if !slices.Equal(all, want) {
			t.Errorf("N=%d: the parts hold %v, want every case once: %v", n, all, want)
		}
		if n > 1 {
			for k := 1; k <= n; k++ {
				if len(Shard{K: k, N: n}.Select(plans)) == len(plans) {
					t.Errorf("%d/%d holds every case: no split", k, n)
				}
			}
		}
	}
}

// Adding cases elsewhere in the file never moves a case to another part.
func TestShardIsStableWhenCasesAreAdded(t *testing.T) {
	before := plansNamed("a", "b", "c", "d", "e", "f", "g", "h")
	after := plansNamed("new-1", "a", "b", "new-2", "c", "d", "e", "f", "g", "h", "new-3")
	for k := 1; k <= 3; k++ {
		s := Shard{K: k, N: 3}
		was := namesOf(s.Select(before))
		var now []string
		for _, n := range namesOf(s.Select(after)) {
			if n[0] != 'n' {
				now = append(now, n)
			}
		}
		if !slices.Equal(was, now) {
			t.Errorf("part %d/3 held %v, and %v once cases were added elsewhere", k, was, now)
		}
	}
}

func TestParseShard(t *testing.T) {
	for in, want := range map[string]Shard{"1/1": {1, 1}, "2/3": {2, 3}, " 3/3 ": {3, 3}} {
		got, err := ParseShard(in)
		if err != nil || got != want {
			t.Errorf("ParseShard(%q) = %v, %v; want %v", in, got, err, want)
		}
		if got.String() != fmt.Sprintf("%d/%d", want.K, want.N) {
			t.Errorf("%v.String() = %q", got, got.String())
		}
	}
	// Each refusal says what is wrong: the form, or the range.
	for in, want := range map[string]string{
		"": "give K/N", "3": "give K/N", "a/b": "give K/N", "a/2": "give K/N", "2/b": "give K/N", "1/2/3": "give K/N",
		"0/3": "K must be from 1 to N", "4/3": "K must be from 1 to N", "1/0": "K must be from 1 to N",
		"-1/2": "K must be from 1 to N", "1/-2": "K must be from 1 to N",
	} {
		if s, err := ParseShard(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseShard(%q) = %v, %v; want an error saying %q", in, s, err, want)
		}
	}
	if (Shard{}).String() != "" || len((Shard{}).Select(plansNamed("a", "b"))) != 2 {
		t.Error("the zero Shard is not the whole suite")
	}
}

// Cases of one name are told apart by their rank among that name, counted
// from 0 in the file's order: the part of each is part(name, rank), and
// part 1 of 1 is every case.
func TestShardRanksCasesOfOneName(t *testing.T) {
	plans := plansNamed("dup", "dup", "dup", "dup", "dup", "other", "dup")
	for i := range plans {
		plans[i].Case.Backend = fmt.Sprint("b", i) // which "dup" is which
	}
	for _, n := range []int{1, 3, 7} {
		var all []Plan
		for k := 1; k <= n; k++ {
			s := Shard{K: k, N: n}
			var want []int
			rank := map[string]int{}
			for i, p := range plans {
				if s.part(p.Case.Name, rank[p.Case.Name]) == k {
					want = append(want, i)
				}
				rank[p.Case.Name]++
			}
			got := s.Select(plans)
			if len(got) != len(want) {
				t.Fatalf("part %d/%d: %d plans, want %d", k, n, len(got), len(want))
			}
			for j, i := range want {
				if got[j].Case.Name != plans[i].Case.Name || got[j].Case.Backend != plans[i].Case.Backend {
					t.Errorf("part %d/%d: plan %d is %+v, want %+v", k, n, j, got[j].Case, plans[i].Case)
				}
			}
			all = append(all, got...)
		}
		if len(all) != len(plans) {
			t.Errorf("%d parts hold %d plans, want each of the %d once", n, len(all), len(plans))
		}
	}
}
