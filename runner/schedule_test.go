package runner

import (
	"context"
	"sync"
	"testing"
)

// checksFirst holds every worker at "act" until each worker of the wave has
// either reached "act" or finished: all checks happen before any write.
type checksFirst struct {
	n       int
	mu      sync.Mutex
	arrived int
	open    chan struct{}
}

func newChecksFirst(n int) *checksFirst { return &checksFirst{n: n, open: make(chan struct{})} }

func (s *checksFirst) arrive() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.arrived++
	if s.arrived == s.n {
		close(s.open)
		s.arrived, s.open = 0, make(chan struct{})
	}
}

func (s *checksFirst) Step(ctx context.Context, _ int, step string) {
	if step != "act" {
		return
	}
	s.mu.Lock()
	open := s.open
	s.mu.Unlock()
	s.arrive()
	select {
	case <-open:
	case <-ctx.Done():
	}
}

func (s *checksFirst) Done(int) {}

// oneAtATime lets one worker at a time past "check", the next only once the
// previous attempt returned: a serial history.
type oneAtATime struct{ turn chan struct{} }

func (s *oneAtATime) Step(ctx context.Context, _ int, step string) {
	if step != "check" {
		return
	}
	select {
	case s.turn <- struct{}{}:
	case <-ctx.Done():
	}
}

func (s *oneAtATime) Done(int) { <-s.turn }

// A naive check-then-write: the Scheduler, not luck, decides how often it
// runs twice. Every check before any write gives N effects in every burst;
// one attempt at a time gives exactly one.
func TestSchedulerOrdersSteps(t *testing.T) {
	naive := func(c *counter) func(ctx context.Context, s Subject, w *Worker) Outcome {
		return func(ctx context.Context, s Subject, w *Worker) Outcome {
			w.Step(ctx, "check")
			c.mu.Lock()
			used := c.effects[s.Key] > 0
			c.mu.Unlock()
			if used {
				return Refused(nil)
			}
			w.Step(ctx, "act")
			c.mu.Lock()
			c.effects[s.Key]++
			c.mu.Unlock()
			return Done()
		}
	}
	const n, bursts = 4, 20
	for _, tc := range []struct {
		name  string
		sched Scheduler
		want  int
	}{
		{"checks first", newChecksFirst(n), n},
		{"one at a time", &oneAtATime{turn: make(chan struct{}, 1)}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCounter()
			c.attempt = naive(c)
			res, err := Run(context.Background(), c, Attempts(n), Bursts(bursts), Schedule(tc.sched))
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range res.Bursts {
				if b.Effects != tc.want {
					t.Fatalf("burst %d: %d effects, want %d (the scheduler decides the interleaving)", b.Index, b.Effects, tc.want)
				}
			}
			if ex := res.Example; ex != nil {
				for _, m := range ex.Workers[0].Marks {
					if m.Name == "check" {
						return
					}
				}
				t.Errorf("worker 0's marks %v have no check: Step must also mark", ex.Workers[0].Marks)
			}
		})
	}
}
