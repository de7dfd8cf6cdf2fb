package cmd

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestServeFlagsParse(t *testing.T) {
	f := &factory{IO: func() *ioStreams { io, _, _ := testStreams(); return io }(), Registry: memoryOnly()}
	var got *serveOptions
	c := newCmdServe(f, func(_ context.Context, o *serveOptions) error { got = o; return nil })
	c.SetArgs([]string{"check-then-write", "--addr", "127.0.0.1:0", "--workers", "4", "--gap", "1ms", "--latency", "100us",
		"--run-id", "abc", "--attached", "--replica", "2", "--postgres-url", "postgres://x/y"})
	if err := c.Execute(); err != nil {
		t.Fatal(err)
	}
	if got.Scenario != "check-then-write" || got.Backend != "memory" || got.Addr != "127.0.0.1:0" || got.Workers != 4 ||
		got.Shape.Gap != time.Millisecond || got.Shape.Latency != 100*time.Microsecond || got.RunID != "abc" ||
		!got.Attached || got.Replica != 2 || got.Shape.Conn.Get("postgres") != "postgres://x/y" {
		t.Errorf("parsed options = %+v", got)
	}
}

func TestRunProcessFlagsParse(t *testing.T) {
	f := &factory{IO: func() *ioStreams { io, _, _ := testStreams(); return io }(), Registry: memoryOnly()}
	var got *runOptions
	c := newCmdRun(f, func(_ context.Context, o *runOptions) error { got = o; return nil })
	c.SetArgs([]string{"memory-set", "--processes", "--replicas", "3", "--restart-between"})
	if err := c.Execute(); err != nil {
		t.Fatal(err)
	}
	if !got.Processes || !got.RestartBetween || got.Shape.Replicas != 3 {
		t.Errorf("parsed options = %+v", got)
	}
}

// syncBuffer is an output a test reads while the command still writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// serve answers attempts, and stops cleanly (exit 0) when asked to.
func TestServeAnswersAndStops(t *testing.T) {
	io, _, _ := testStreams()
	out := &syncBuffer{}
	io.Out = out
	f := &factory{IO: io, Registry: memoryOnly()}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- runServe(ctx, &serveOptions{factory: f, Scenario: "conditional-update", Backend: "memory", Addr: "127.0.0.1:0", Workers: 2, Timeout: time.Second})
	}()
	addr := ""
	for deadline := time.Now().Add(10 * time.Second); addr == ""; time.Sleep(10 * time.Millisecond) {
		if m := regexp.MustCompile(`listening on http://(\S+)`).FindStringSubmatch(out.String()); m != nil {
			addr = m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not say where it listens: %q", out.String())
		}
	}
	if !strings.Contains(out.String(), "racetest http POST") {
		t.Errorf("serve alone shows how to fire at it:\n%s", out.String())
	}
	codes := []int{}
	for range 2 {
		resp, err := http.Post("http://"+addr+"/attempt?key=k1", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		codes = append(codes, resp.StatusCode)
	}
	if codes[0] != 200 || codes[1] != 409 {
		t.Errorf("statuses %v, want [200 409]", codes)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve stopped with %v, want a clean stop", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop")
	}
}

func TestServeBadInput(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"serve", "no-such"}, exitUsage, "unknown scenario"},
		{[]string{"serve", "memory-set", "--workers", "0"}, exitUsage, "--workers"},
		{[]string{"serve", "memory-set", "--addr", ln.Addr().String()}, exitSetup, "cannot listen"},
		{[]string{"serve", "memory-set", "--addr", "nope"}, exitUsage, "is not HOST:PORT"},
		{[]string{"serve", "memory-set", "--addr", "127.0.0.1:http2"}, exitUsage, "is not a port"},
		{[]string{"serve", "memory-set", "--addr", "127.0.0.1:99999"}, exitUsage, "is not a port"},
	} {
		_, errOut, code := execCmd(t, false, c.args...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, %q; want %d and %q", c.args, code, errOut, c.code, c.want)
		}
	}
}

// run --processes with the real binary: one process executes memory-set
// once, three execute it three times, a restart executes it again, and no
// process outlives the run.
func TestRunProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds racetest")
	}
	exe := filepath.Join(t.TempDir(), "racetest")
	build := exec.Command("go", "build", "-o", exe, "github.com/racetest/racetest")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	old := serveExecutable
	serveExecutable = func() (string, error) { return exe, nil }
	defer func() { serveExecutable = old }()
	pidRE := regexp.MustCompile(`pid (\d+)`)
	for _, c := range []struct {
		args   []string
		effect string
		code   int
	}{
		{[]string{"--replicas", "1"}, "1/1/1", exitOK},
		{[]string{"--replicas", "3"}, "3/3/3", exitViolated},
		{[]string{"--replicas", "1", "--restart-between"}, "2/2/2", exitViolated},
	} {
		args := append([]string{"run", "memory-set", "--processes", "-n", "6", "--bursts", "3", "--timeline=false"}, c.args...)
		out, errOut, code := execCmd(t, false, args...)
		if code != c.code || !strings.Contains(out, c.effect) {
			t.Errorf("%v: exit %d, want %d and effects %s\n%s%s", c.args, code, c.code, c.effect, out, errOut)
		}
		pids := pidRE.FindAllStringSubmatch(out, -1)
		if len(pids) == 0 {
			t.Errorf("%v: the report shows no PIDs:\n%s", c.args, out)
		}
		for _, m := range pids {
			pid, _ := strconv.Atoi(m[1])
			if !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
				t.Errorf("replica process %d outlived the run", pid)
			}
		}
	}
}
