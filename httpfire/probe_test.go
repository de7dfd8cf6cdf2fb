package httpfire_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/racetest/racetest/httpfire"
	"github.com/racetest/racetest/report"
	"github.com/racetest/racetest/runner"
)

// A server that serves one connection at a time, as one sync worker does,
// behind an endpoint whose winner works longer than the requests it
// refuses (a check-then-insert: one insert, then fast 409s). From the
// response times alone the queue looks like requests served at once (the
// first response is slow, the rest follow close behind), and the run read
// SAFE. The probe finds that the server does not answer a second request
// while a first is unfinished: INCONCLUSIVE, naming one worker.
//
// The same holds when the server keeps connections alive, as Python's
// HTTPServer does on HTTP/1.1: it reads one connection until the client
// closes it, so a connection racetest kept open (an attempt's, the effects
// check's) left every other request unanswered, and the run read ERROR,
// "is the server still up?".
func TestOneWorkerServerIsInconclusiveWhateverTheTimes(t *testing.T) {
	for _, keepAlive := range []bool{false, true} {
		t.Run(fmt.Sprintf("keep-alive=%v", keepAlive), func(t *testing.T) {
			oneWorkerIsInconclusive(t, keepAlive)
		})
	}
}

func oneWorkerIsInconclusive(t *testing.T, keepAlive bool) {
	s := newSubjects(20 * time.Millisecond)
	s.QuickRefusal = true
	srv := newBoundedServer(t, 1, s)
	srv.Config.SetKeepAlivesEnabled(keepAlive)
	res, a := runSubjects(t, srv.URL, httpfire.LastByte, 8, 6)
	t.Logf("%s %s; notes %q", a.Verdict, a.Why, res.Notes)
	if a.Verdict != report.Inconclusive || a.Tested != 0 ||
		!strings.Contains(a.Why, "the server answers one request at a time (it did not answer a second request while a first was unfinished)") ||
		!strings.Contains(a.Why, "does it have one worker?") {
		t.Fatalf("verdict %s, %d tested (%s); want INCONCLUSIVE, none tested, naming a server with one worker", a.Verdict, a.Tested, a.Why)
	}
	if !res.ServerProbe.Serial() || !hasNote(res.Notes, "server concurrency probe (serial)", "OPTIONS *") {
		t.Errorf("the probe found %+v (notes %q); want a serial server", res.ServerProbe, res.Notes)
	}
	for _, b := range res.Bursts {
		if b.ServerParallelism != 1 || !b.Serial() {
			t.Errorf("burst %d: server parallelism %.2f; want 1, as the probe found", b.Index, b.ServerParallelism)
		}
	}
}

// The same endpoint on a server that serves requests concurrently races,
// and the probe says the server is concurrent: the winner's longer work
// changes nothing there.
func TestConcurrentServerWinnerWorksLonger(t *testing.T) {
	s := newSubjects(20 * time.Millisecond)
	s.QuickRefusal = true
	srv := newBoundedServer(t, 16, s)
	res, a := runSubjects(t, srv.URL, httpfire.LastByte, 8, 4)
	if a.Verdict != report.Race || !res.ServerProbe.Concurrent() {
		t.Fatalf("verdict %s (%s), probe %+v; want RACE from a concurrent server", a.Verdict, a.Why, res.ServerProbe)
	}
}

// A server that speaks only HTTP/2 over TLS cannot be probed over
// HTTP/1.1: the probe says it did not run and why, and the run goes on,
// judged by the response-time estimate as before.
func TestProbeNotRunOnAnHTTP2OnlyServer(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 2 {
			t.Errorf("the server was handed an %s request", r.Proto)
		}
	}))
	srv.EnableHTTP2 = true
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP2(true)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	cfg := httpfire.Config{Method: "POST", URL: srv.URL + "/", Release: httpfire.SinglePacket, Insecure: true, Timeout: 5 * time.Second}
	target, err := httpfire.New(cfg, params())
	if err != nil {
		t.Fatal(err)
	}
	res, err := runner.Run(context.Background(), target, runner.Attempts(4), runner.Bursts(2))
	if err != nil {
		t.Fatal(err)
	}
	p := res.ServerProbe
	t.Logf("probe: %+v", p)
	if p == nil || p.Result != runner.ProbeNotRun || !strings.Contains(p.Detail, "does the server speak only HTTP/2? the probe needs HTTP/1.1") || !strings.Contains(p.Detail, "response-time estimate alone") {
		t.Fatalf("probe %+v; want not run, saying why and what judges instead", p)
	}
	if len(res.Bursts) != 2 || res.Bursts[0].Outcomes[runner.Executed] != 4 {
		t.Errorf("the run did not go on: %d bursts, %v", len(res.Bursts), res.Bursts)
	}
}

// The probe sends nothing that can change anything: every request the
// server read whole is the run's own (setup, attempt, effects check) or
// OPTIONS * without a body, and the held request never reached the end of
// its header block. The handler is never handed a probe (Go's net/http
// answers OPTIONS * itself): it saw the run's requests and no others.
func TestProbeSendsNothingThatChanges(t *testing.T) {
	rec := &recordingListener{}
	var mu sync.Mutex
	handled := map[string]int{} // "METHOD PATH" → times the handler was handed it
	s := newSubjects(time.Millisecond)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		handled[r.Method+" "+r.URL.Path]++
		mu.Unlock()
		s.ServeHTTP(w, r)
	}))
	rec.Listener = srv.Listener
	srv.Listener = rec
	srv.Start()
	t.Cleanup(srv.Close)

	const n, bursts = 4, 3
	res, _ := runSubjects(t, srv.URL, httpfire.LastByte, n, bursts)
	if !res.ServerProbe.Concurrent() {
		t.Fatalf("the probe found %+v, want a concurrent server", res.ServerProbe)
	}
	srv.Close() // every connection read to its end

	options, held := 0, 0
	for i, raw := range rec.all() {
		br := bufio.NewReader(bytes.NewReader(raw))
		for {
			req, err := http.ReadRequest(br)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				// Cut short: only the probe's held request may be.
				rest := raw[len(raw)-br.Buffered():]
				if !bytes.HasPrefix(raw, []byte("OPTIONS * HTTP/1.1\r\n")) || bytes.Contains(raw, []byte("\r\n\r\n")) {
					t.Errorf("connection %d: a request cut short that is not the probe's held one (%v): %q (left %q)", i, err, raw, rest)
				}
				held++
				break
			}
			body, _ := io.ReadAll(req.Body)
			switch what := req.Method + " " + req.URL.Path; {
			case req.Method == http.MethodOptions && req.RequestURI == "*":
				options++
				if len(body) > 0 || req.ContentLength > 0 {
					t.Errorf("connection %d: the probe's OPTIONS * carried a body %q", i, body)
				}
			case what == "PUT /setup", what == "POST /attempt", what == "GET /count":
			default:
				t.Errorf("connection %d: the server read %s %s, which the run never asked for", i, req.Method, req.RequestURI)
			}
		}
	}
	// One alone, then one beside each held request: a concurrent server
	// answers the first round.
	if options < 2 || held < 1 || options != held+1 {
		t.Errorf("the server read %d whole OPTIONS * and %d held requests; want one alone and one beside each held one", options, held)
	}
	mu.Lock()
	defer mu.Unlock()
	want := map[string]int{"PUT /setup": bursts, "POST /attempt": n * bursts, "GET /count": 2 * bursts}
	if !maps.Equal(handled, want) {
		t.Errorf("the handler was handed %v, want %v", handled, want)
	}
}

// recordingListener keeps every byte the server read, per connection.
type recordingListener struct {
	net.Listener
	mu    sync.Mutex
	conns []*lockedBuffer
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *recordingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	b := &lockedBuffer{}
	l.mu.Lock()
	l.conns = append(l.conns, b)
	l.mu.Unlock()
	return &recordingConn{Conn: c, rec: b}, nil
}

func (l *recordingListener) all() [][]byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out [][]byte
	for _, b := range l.conns {
		b.mu.Lock()
		if b.buf.Len() > 0 {
			out = append(out, bytes.Clone(b.buf.Bytes()))
		}
		b.mu.Unlock()
	}
	return out
}

type recordingConn struct {
	net.Conn
	rec *lockedBuffer
}

func (c *recordingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.rec.mu.Lock()
	c.rec.buf.Write(p[:n])
	c.rec.mu.Unlock()
	return n, err
}

// TestProbeMeasured runs the probe alone, many times, against servers that
// serve requests concurrently and against servers with one worker, and
// prints how often it was wrong (RACETEST_MEASURE_PROBE=1; docs/http.md
// quotes it). RACETEST_MEASURE_PROBE_RUNS sets the runs against each
// concurrent server (200), a tenth of them against each serial one (each
// of those waits out the probe's bound twice;
// RACETEST_MEASURE_PROBE_SERIAL_RUNS sets it, 0 skips them). RACETEST_PROBE_BURN=N keeps
// N goroutines spinning meanwhile, to load the machine further.
func TestProbeMeasured(t *testing.T) {
	if os.Getenv("RACETEST_MEASURE_PROBE") == "" {
		t.Skip("a measurement: set RACETEST_MEASURE_PROBE=1 to run it")
	}
	runs := 200
	if n, err := strconv.Atoi(os.Getenv("RACETEST_MEASURE_PROBE_RUNS")); err == nil && n > 0 {
		runs = n
	}
	if n, _ := strconv.Atoi(os.Getenv("RACETEST_PROBE_BURN")); n > 0 {
		stop := make(chan struct{})
		defer close(stop)
		for range n {
			go func() {
				for x := 0; ; x++ {
					select {
					case <-stop:
						return
					default:
					}
				}
			}()
		}
	}
	type server struct {
		name   string
		url    func(t *testing.T) string
		serial bool
	}
	servers := []server{
		{"Go net/http, HTTP/1.1", func(t *testing.T) string { return newServer(t, plainH1, newSubjects(0)).URL }, false},
		{"Go net/http, h2c", func(t *testing.T) string { return newServer(t, h2c, newSubjects(0)).URL }, false},
		{"two connections at a time", func(t *testing.T) string { return newBoundedServer(t, 2, newSubjects(0)).URL }, false},
		{"one connection at a time", func(t *testing.T) string { return newBoundedServer(t, 1, newSubjects(0)).URL }, true},
	}
	if _, err := exec.LookPath("gunicorn"); err == nil {
		servers = append(servers,
			server{"gunicorn gthread, 4 threads", func(t *testing.T) string { return gunicorn(t, "-k", "gthread", "--threads", "4") }, false},
			server{"gunicorn sync, one worker", func(t *testing.T) string { return gunicorn(t, "-k", "sync") }, true})
	}
	for _, s := range servers {
		url := s.url(t)
		n := runs
		if s.serial {
			n = max(1, runs/10)
			if v, err := strconv.Atoi(os.Getenv("RACETEST_MEASURE_PROBE_SERIAL_RUNS")); err == nil {
				n = v
			}
		}
		got := map[string]int{}
		retried := 0 // concurrent on the second try: the first try alone would have been wrong
		var worst time.Duration
		for range n {
			target, err := httpfire.New(httpfire.Config{Method: "POST", URL: url + "/attempt", Release: httpfire.LastByte, Timeout: 10 * time.Second}, params())
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			if err := target.Prepare(context.Background()); err != nil {
				t.Fatal(err)
			}
			worst = max(worst, time.Since(start))
			p := target.ServerProbe()
			got[p.Result]++
			if strings.Contains(p.Detail, "on try 2") {
				retried++
			}
			if p.Result == runner.ProbeNotRun || (p.Result == runner.ProbeSerial) != s.serial {
				t.Logf("%s: %s", s.name, p.Detail)
			}
			target.Cleanup(context.Background())
		}
		wrong := got[runner.ProbeSerial]
		if s.serial {
			wrong = got[runner.ProbeConcurrent]
		}
		load, _ := os.ReadFile("/proc/loadavg")
		if n == 0 {
			continue
		}
		t.Logf("%-28s runs %4d: concurrent %4d (%d on the second try), serial %4d, not run %d; wrong %d (%.1f%%); slowest probe %s; load %s",
			s.name, n, got[runner.ProbeConcurrent], retried, got[runner.ProbeSerial], got[runner.ProbeNotRun], wrong, 100*float64(wrong)/float64(n), worst.Round(time.Millisecond), strings.Fields(string(load))[0])
	}
}
