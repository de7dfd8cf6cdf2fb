package scenarios

import (
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// A run's process: alive while it runs; ended once killed, even before its
// parent reaps it (a zombie), as after a SIGKILL from a script that has
// not waited yet; and ended once reaped.
func TestAliveSeesAZombieAsEnded(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("zombies are told apart through /proc, which only Linux has")
	}
	host, _ := os.Hostname()
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Whatever fails below, the child does not outlive the test.
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	r := Record{RunID: "zombie01", Host: host, PID: cmd.Process.Pid}
	if alive, known := r.Alive(); !alive || !known {
		t.Fatalf("running: alive %v, known %v; want true, true", alive, known)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Not reaped: the process stays a zombie until Wait.
	deadline := time.Now().Add(10 * time.Second)
	for !ended(r.PID) {
		if time.Now().After(deadline) {
			t.Fatal("the killed process never showed as a zombie in /proc")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if alive, known := r.Alive(); alive || !known {
		t.Errorf("killed, not reaped: alive %v, known %v; want false, true", alive, known)
	}
	_ = cmd.Wait()
	if alive, known := r.Alive(); alive || !known {
		t.Errorf("reaped: alive %v, known %v; want false, true", alive, known)
	}
	elsewhere := Record{Host: host + "-elsewhere", PID: os.Getpid()}
	if _, known := elsewhere.Alive(); known {
		t.Error("a run registered from another host: known, want unknown")
	}
}

// procState reads the letter after the last ')': a command name with
// spaces and parentheses does not fool it, and a line without one gives 0.
func TestProcState(t *testing.T) {
	for stat, want := range map[string]byte{
		"4242 (sleep) S 1 4242 4242 0 -1": 'S',
		"4242 (racetest) Z 1 4242":        'Z',
		"4242 (a (b) c)) X 1":             'X',
		"4242 (sleep":                     0,
		"4242 (sleep)":                    0,
		"4242 (sleep)-Z 1":                0,
		"":                                0,
	} {
		if got := procState([]byte(stat)); got != want {
			t.Errorf("procState(%q) = %q, want %q", stat, got, want)
		}
	}
	if runtime.GOOS == "linux" && ended(os.Getpid()) {
		t.Error("this process: ended, want running")
	}
	if ended(1 << 30) {
		t.Error("a pid with no /proc entry: ended, want false (unknown counts as alive)")
	}
}
