//go:build linux

package privserver_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/racetest/racetest/internal/privserver"
)

// Each kind starts on a port of its own, stops answering while paused,
// answers again once resumed, comes back after a kill with its data, and
// leaves no directory behind. RACETEST_FAULTS=1 runs it (it starts three
// servers: .ci/run's fault step does).
func TestPauseKillRestart(t *testing.T) {
	privserver.Gate(t)
	for _, kind := range []privserver.Kind{privserver.Redis, privserver.MariaDB, privserver.Postgres} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			privserver.Need(t, kind)
			s := privserver.Start(t, kind)
			for _, shared := range []int{6379, 3306, 5432} {
				if s.Port == shared {
					t.Fatalf("started on the shared port %d", shared)
				}
			}
			if err := s.Ping(context.Background()); err != nil {
				t.Fatalf("does not answer after Start: %v", err)
			}
			if err := s.Pause(); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			err := s.Ping(ctx)
			cancel()
			if err == nil {
				t.Fatal("answered while paused")
			}
			if err := s.Resume(); err != nil {
				t.Fatal(err)
			}
			if err := s.Ping(context.Background()); err != nil {
				t.Fatalf("does not answer after Resume: %v", err)
			}
			if err := s.Kill(); err != nil {
				t.Fatal(err)
			}
			if err := s.Ping(context.Background()); err == nil {
				t.Fatal("answered after Kill")
			}
			if err := s.Restart(); err != nil {
				t.Fatal(err)
			}
			dir := s.Dir()
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Fatalf("Close left %s (%v)", dir, err)
			}
		})
	}
}
