package serve_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/racetest/racetest/scenarios/memstore"

	"github.com/racetest/racetest/internal/testenv"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/serve"
)

// The test binary doubles as the replica process (and, for the orphan test,
// as a parent that dies): the environment says which.
const (
	childEnv  = "RACETEST_SERVE_TEST_CHILD"
	parentEnv = "RACETEST_SERVE_TEST_PARENT"
)

func TestMain(m *testing.M) {
	switch {
	case os.Getenv(childEnv) != "":
		os.Exit(childMain(os.Args[1:]))
	case os.Getenv(parentEnv) != "":
		os.Exit(parentMain())
	}
	os.Exit(m.Run())
}

// childMain is a minimal 'racetest serve --attached': args are scenario,
// run id, replica, workers.
func childMain(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	replica, _ := strconv.Atoi(args[2])
	workers, _ := strconv.Atoi(args[3])
	target, err := testenv.Registry(memstore.Register).Build(ctx, args[0], "memory", scenarios.Params{RunID: args[1], Latency: 20 * time.Microsecond})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	srv, err := serve.New(ctx, serve.Options{Target: target, Replica: replica, Workers: workers, Attached: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	fmt.Printf("listening on http://%s\n", ln.Addr())
	hs := &http.Server{Handler: srv.Handler()}
	go hs.Serve(ln)
	orphaned := make(chan struct{})
	go func() { io.Copy(io.Discard, os.Stdin); close(orphaned) }()
	select {
	case <-ctx.Done():
	case <-orphaned:
	}
	hs.Close()
	srv.Close(context.Background())
	return 0
}

func fleet(t testing.TB, scenario string) *serve.Fleet {
	t.Helper()
	f, err := newFleet(scenario)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func newFleet(scenario string) (*serve.Fleet, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	runID := scenarios.NewRunID()
	return serve.NewFleet(serve.FleetOptions{
		Executable: exe,
		Args: func(replica, workers int) []string {
			return []string{scenario, runID, strconv.Itoa(replica), strconv.Itoa(workers)}
		},
		Env:             append(os.Environ(), childEnv+"=1"),
		PerProcessStore: true,
		Timeout:         5 * time.Second,
	})
}

// gone reports whether pid no longer exists (not even as a zombie: reaped).
func gone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

func assertReaped(t *testing.T, pids []int) {
	t.Helper()
	if len(pids) == 0 {
		t.Fatal("no process was started")
	}
	for _, pid := range pids {
		if !gone(pid) {
			t.Errorf("replica process %d is still there after the run", pid)
		}
	}
}

// The lesson with real processes: memory-set holds with one replica, and
// with three each process lets one attempt through.
func TestFleetMemorySet(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("process checks use kill(pid, 0)")
	}
	for _, c := range []struct{ replicas, want int }{{1, 1}, {3, 3}} {
		t.Run(fmt.Sprintf("%d processes", c.replicas), func(t *testing.T) {
			f := fleet(t, scenarios.MemorySet)
			res, err := runner.Run(context.Background(), f, runner.Attempts(6), runner.Bursts(8), runner.Replicas(c.replicas), runner.Timeout(5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range res.Bursts {
				if b.Effects != c.want {
					t.Errorf("burst %d: %d effects, want %d (one per process)", b.Index, b.Effects, c.want)
				}
			}
			if pids := f.PIDs(); len(pids) != c.replicas {
				t.Errorf("%d processes started, want %d", len(pids), c.replicas)
			}
			assertReaped(t, f.PIDs())
			if notes := strings.Join(f.Notes(), "\n"); !strings.Contains(notes, "pid "+strconv.Itoa(f.PIDs()[0])) {
				t.Errorf("the notes do not show the PIDs:\n%s", notes)
			}
		})
	}
}

// A deploy between waves restarts the process: its memory is gone, so the
// same subject executes again, and the effects of the stopped process count.
func TestFleetDeploy(t *testing.T) {
	f := fleet(t, scenarios.MemorySet)
	res, err := runner.Run(context.Background(), f, runner.Attempts(3), runner.Bursts(3), runner.Waves(2), runner.Deploy(true))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range res.Bursts {
		if b.Effects != 2 {
			t.Errorf("burst %d: %d effects, want 2 (one before the deploy, one after)", b.Index, b.Effects)
		}
	}
	if n := len(f.PIDs()); n != 1+3 {
		t.Errorf("%d processes started, want 4 (one, then one per deploy)", n)
	}
	assertReaped(t, f.PIDs())
}

// Ctrl-C mid-run: the runner stops, and every process is stopped and reaped.
func TestFleetStopsOnCancel(t *testing.T) {
	f := fleet(t, scenarios.MemorySet)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := runner.Run(ctx, f, runner.Attempts(4), runner.Bursts(10000), runner.Replicas(2),
		runner.OnProgress(func(p runner.Progress) {
			if p.Done == 3 {
				cancel()
			}
		}))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("run returned %v, want context.Canceled", err)
	}
	assertReaped(t, f.PIDs())
}

// A replica that cannot start says why.
func TestFleetStartFailure(t *testing.T) {
	f := fleet(t, "no-such-scenario")
	_, err := runner.Run(context.Background(), f, runner.Attempts(2), runner.Bursts(1))
	if err == nil || !strings.Contains(err.Error(), "exited before it listened") || !strings.Contains(err.Error(), "no-such-scenario") {
		t.Fatalf("err = %v, want the replica's own words", err)
	}
	assertReaped(t, f.PIDs())
}

// parentMain starts a fleet, prints its PIDs and waits to be killed.
func parentMain() int {
	f, err := newFleet(scenarios.MemorySet)
	if err == nil {
		_, err = f.Open(context.Background(), 0, 1)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(f.PIDs()[0])
	select {}
}

// racetest killed outright (SIGKILL: no chance to clean up) takes its
// replicas with it.
func TestFleetNoOrphansWhenParentDies(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("relies on Linux's parent-death signal")
	}
	exe, _ := os.Executable()
	parent := exec.Command(exe)
	parent.Env = append(os.Environ(), parentEnv+"=1")
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	parent.Stderr = os.Stderr
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		parent.Process.Kill()
		t.Fatalf("the parent printed no pid: %v", err)
	}
	child, _ := strconv.Atoi(strings.TrimSpace(line))
	parent.Process.Kill()
	parent.Wait()
	// The child is not ours to reap: it is gone when init has reaped it.
	deadline := time.Now().Add(10 * time.Second)
	for !gone(child) {
		if time.Now().After(deadline) {
			syscall.Kill(child, syscall.SIGKILL)
			t.Fatalf("replica %d outlived its killed parent by 10s", child)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
