package httpfire_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/racetest/racetest/httpfire"
	"github.com/racetest/racetest/internal/testenv"
	"github.com/racetest/racetest/report"
	"github.com/racetest/racetest/runner"
)

// gunicorn starts testdata/wsgi/coupons.py (a naive check-then-insert)
// under gunicorn with args, and returns its base URL. Without gunicorn the
// test skips, or fails under RACETEST_REQUIRE_SERVERS (Debian: apt-get
// install gunicorn).
func gunicorn(t *testing.T, args ...string) string {
	t.Helper()
	bin, err := exec.LookPath("gunicorn")
	if err != nil {
		testenv.Missing(t, fmt.Sprintf("gunicorn not found (apt-get install gunicorn): %v", err))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var log strings.Builder
	cmd := exec.Command(bin, append([]string{"--chdir", "testdata/wsgi", "-b", addr, "-w", "1"}, append(args, "coupons:app")...)...)
	cmd.Stdout, cmd.Stderr = &log, &log
	// No __pycache__ left in testdata.
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("gunicorn's log:\n%s", log.String())
		}
	})
	url := "http://" + addr
	for end := time.Now().Add(30 * time.Second); ; {
		resp, err := http.Get(url + "/count?key=ready")
		if err == nil {
			resp.Body.Close()
			return url
		}
		if time.Now().After(end) {
			t.Fatalf("gunicorn %s did not answer within 30s: %v", strings.Join(args, " "), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Under gunicorn's default, one sync worker, the naive coupon service
// answers a burst one request at a time and cannot race there: the run is
// INCONCLUSIVE and names the cause, where it used to read SAFE. With
// gthread and several threads the same code races. Both runs use --setup
// and no --warmup, which used to time out behind racetest's own idle
// connections.
//
// /claim is the same check-then-insert with a winner that works longer
// than the requests it refuses (409 at once): under one sync worker its
// queue of responses looks, from their times alone, like requests served
// at once, and the run read SAFE. The probe of the server (one request
// held unfinished, a second asked beside it) finds one worker whatever
// the endpoint's times.
func TestGunicorn(t *testing.T) {
	for _, c := range []struct {
		name  string
		args  []string
		path  string
		want  report.Verdict
		probe string
	}{
		{"sync, one worker", []string{"-k", "sync"}, "/attempt", report.Inconclusive, runner.ProbeSerial},
		{"sync, one worker, the winner works longer", []string{"-k", "sync"}, "/claim", report.Inconclusive, runner.ProbeSerial},
		{"gthread, 1 worker × 4 threads", []string{"-k", "gthread", "--threads", "4"}, "/attempt", report.Race, runner.ProbeConcurrent},
		{"gthread, 1 worker × 4 threads, the winner works longer", []string{"-k", "gthread", "--threads", "4"}, "/claim", report.Race, runner.ProbeConcurrent},
	} {
		t.Run(c.name, func(t *testing.T) {
			url := gunicorn(t, c.args...)
			res, a := runSubjectsAt(t, url, c.path, httpfire.LastByte, 16, 20)
			t.Logf("%s: %s %s; notes %q", c.name, a.Verdict, a.Why, res.Notes)
			if a.Verdict != c.want {
				t.Fatalf("verdict %s (%s), want %s", a.Verdict, a.Why, c.want)
			}
			if c.want == report.Inconclusive && (!strings.Contains(a.Why, "one request at a time") || !strings.Contains(a.Why, "one worker")) {
				t.Errorf("why %q does not name a server that answered one request at a time", a.Why)
			}
			if c.want == report.Race && res.Serial() > len(res.Bursts)/2 {
				t.Errorf("%d of %d bursts judged served one at a time by gthread with 4 threads", res.Serial(), len(res.Bursts))
			}
			if p := res.ServerProbe; p == nil || p.Result != c.probe {
				t.Errorf("the probe found %+v, want %s", p, c.probe)
			}
			// What the application was handed: the run's requests, and
			// the probe's OPTIONS * and nothing else.
			seen := get(t, url+"/seen")
			options := 0
			for _, line := range strings.Split(seen, "\n") {
				switch line {
				case "PUT /setup", "POST " + c.path, "GET /count":
				case "OPTIONS *":
					options++
				default:
					t.Errorf("the application was handed %q, which the run never asked for", line)
				}
			}
			if options < 2 {
				t.Errorf("the application saw %d OPTIONS * requests; want the probe's, alone and beside a held request", options)
			}
		})
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}
