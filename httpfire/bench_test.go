package httpfire_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/racetest/racetest/httpfire"
	"github.com/racetest/racetest/httpfire/httpfiretest"
	"github.com/racetest/racetest/runner"
)

// targetEnv makes the test binary serve a check-then-write endpoint in its
// own process: the benchmark's target, on the same machine but not in the
// same Go runtime as the client (which would otherwise decide when the
// server's goroutines run, and so what the server measures).
const targetEnv = "RACETEST_HTTPFIRE_TARGET"

func TestMain(m *testing.M) {
	if kind := os.Getenv(targetEnv); kind != "" {
		os.Exit(targetMain(kind))
	}
	os.Exit(m.Run())
}

// targetMain serves the endpoint until its standard input closes; its first
// line of output is its URL.
func targetMain(kind string) int {
	ctw := httpfiretest.NewCheckThenWrite(benchWindow)
	ctw.Tail = benchTail
	var url string
	var stop func()
	if kind == wireH1 {
		ws, err := httpfiretest.NewWireServer(ctw)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		url, stop = ws.URL, ws.Close
	} else {
		srv := startServer(kind, ctw)
		url, stop = srv.URL, srv.Close
	}
	fmt.Println(url)
	io.Copy(io.Discard, os.Stdin)
	stop()
	return 0
}

// startTarget runs the endpoint in a process of its own.
func startTarget(b *testing.B, kind string) string {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), targetEnv+"="+kind)
	stdin, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { stdin.Close(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		b.Fatalf("the target did not start: %v", err)
	}
	return strings.TrimSpace(line)
}

// The endpoint's window is 100µs of I/O (see httpfiretest.CheckThenWrite),
// and it answers a millisecond after its window, as a real one would after
// more work: a burst's first answers then do not compete with its last
// arrivals for the two cores this was measured on.
const benchWindow, benchTail = 100 * time.Microsecond, time.Millisecond

// wireH1 is a bare HTTP/1.1 server (httpfiretest.WireServer): it
// timestamps a request as soon as its last byte is read.
const wireH1 = "bare-http1"

// BenchmarkRelease measures, for each release mode, how closely a burst's
// requests arrive at a check-then-write endpoint whose window is 100µs, and
// how often a burst exposes the race. One iteration is a run of 200 bursts:
//
//	go test ./httpfire -run '^$' -bench Release -benchtime 1x
//
// The endpoint runs in its own process. Metrics: srv-µs is the median
// arrival spread measured at the server (first to last request fully read,
// from its X-Racetest-Arrival stamps), cli-µs the median client-side
// release spread (first to last request leaving), exposed-% the share of
// bursts with more than one write, failed the attempts with no answer.
func BenchmarkRelease(b *testing.B) {
	const bursts = 200
	rows := []struct {
		mode   httpfire.Release
		server string
	}{
		{httpfire.Naive, plainH1},
		{httpfire.Barrier, plainH1},
		{httpfire.LastByte, plainH1},
		{httpfire.SinglePacket, h2c},
		{httpfire.SinglePacket, tlsH2},
		{httpfire.Barrier, wireH1},
		{httpfire.LastByte, wireH1},
	}
	for _, n := range []int{20, 64} {
		for _, row := range rows {
			b.Run(fmt.Sprintf("N=%d/%s/%s", n, row.mode, row.server), func(b *testing.B) {
				url := startTarget(b, row.server)
				for range b.N {
					target, err := httpfire.New(ctwConfig(url, row.mode), params())
					if err != nil {
						b.Fatal(err)
					}
					res, err := runner.Run(context.Background(), target, runner.Attempts(n), runner.Bursts(bursts), runner.Timeout(10*time.Second))
					if err != nil {
						b.Fatal(err)
					}
					client, arrival := target.Spreads()
					out := res.Outcomes()
					b.ReportMetric(micros(medianOf(arrival)), "srv-µs")
					b.ReportMetric(micros(medianOf(client)), "cli-µs")
					b.ReportMetric(100*float64(res.Violations())/float64(len(res.Bursts)), "exposed-%")
					b.ReportMetric(float64(out[runner.Error]+out[runner.Unknown]), "failed")
				}
			})
		}
	}
}

func micros(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

func medianOf(xs []time.Duration) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), xs...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}
