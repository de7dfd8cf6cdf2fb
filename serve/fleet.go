package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/racetest/racetest/runner"
)

// The engine contract, and the optional parts this target promises:
// checked here so a changed signature fails the build, not the report.
var (
	_ runner.Target = (*Fleet)(nil)
	_ runner.Closer = (*Fleet)(nil)
)

// FleetOptions configure a Fleet.
type FleetOptions struct {
	// Executable and Args start replica number replica, which serves
	// workers of the run's attempts: racetest itself, with
	// "serve SCENARIO --attached ...". The process must print
	// "listening on http://HOST:PORT" as its first line of output, and
	// exit when its standard input closes.
	Executable string
	Args       func(replica, workers int) []string
	// Env is the processes' environment (connection strings go here, not in
	// Args, where any user of the machine could read them).
	Env []string
	// Control is the scenario on its backend in this process: it prepares
	// the store, makes each burst's subject, counts the effects and cleans
	// up. Nil when each process has its own store (PerProcessStore).
	Control runner.Target
	// PerProcessStore: the backend lives inside each process (memory).
	// Subjects are made in every process and the effects summed over them.
	PerProcessStore bool
	// Timeout bounds each attempt's HTTP request (0: none).
	Timeout time.Duration
	// StartTimeout bounds a process's start, until it listens (default 15s).
	StartTimeout time.Duration
	// Allowed is the effects per burst that are correct, when Control does
	// not decide it per burst (runner.Allowancer); 0 means 1.
	Allowed int
}

// Fleet is a runner.Target whose replicas are real processes serving the
// scenario over HTTP; worker i's attempts go to replica i mod R, as a
// round-robin load balancer would send them. Each Open starts a process and
// each App.Close stops it, so the runner's deploy between waves restarts
// them all. Processes are stopped when the run ends, also when it is
// interrupted, and (on Linux) when this process dies.
type Fleet struct {
	o FleetOptions

	mu       sync.Mutex
	live     []*process
	started  []*process
	cur      *runner.Subject
	departed map[int]int // effects counted in processes already stopped (per burst)

	attempts, failed atomic.Int64 // attempts, and those that failed with an error
	burstOK          atomic.Int64 // attempts of the current burst that reached the scenario
	firstErr         atomic.Value // string
}

// NewFleet returns a fleet; processes start when the runner opens replicas.
func NewFleet(o FleetOptions) (*Fleet, error) {
	if o.Control == nil && !o.PerProcessStore {
		return nil, errors.New("serve: a fleet needs a Control target unless each process has its own store")
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 15 * time.Second
	}
	if o.Allowed == 0 {
		o.Allowed = 1
	}
	return &Fleet{o: o, departed: map[int]int{}}, nil
}

// PIDs lists the process ids of every replica started so far.
func (f *Fleet) PIDs() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	pids := make([]int, len(f.started))
	for i, p := range f.started {
		pids[i] = p.pid
	}
	return pids
}

func (f *Fleet) Prepare(ctx context.Context) error {
	if f.o.Control == nil {
		return nil
	}
	return f.o.Control.Prepare(ctx)
}

func (f *Fleet) Cleanup(ctx context.Context) error {
	f.stopAll()
	if f.o.Control == nil {
		return nil
	}
	return f.o.Control.Cleanup(ctx)
}

// Close stops any process still running and closes the control target.
func (f *Fleet) Close() error {
	f.stopAll()
	if c, ok := f.o.Control.(runner.Closer); ok {
		return c.Close()
	}
	return nil
}

func (f *Fleet) stopAll() {
	f.mu.Lock()
	live := f.live
	f.live = nil
	f.mu.Unlock()
	for _, p := range live {
		p.stop()
	}
}

func (f *Fleet) Open(ctx context.Context, replica, workers int) (runner.App, error) {
	p, err := start(ctx, f.o, replica, workers)
	if p != nil {
		// Listed even when it failed to start: its pid is in the report.
		f.mu.Lock()
		f.started = append(f.started, p)
		f.mu.Unlock()
	}
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.live = append(f.live, p)
	cur := f.cur
	f.mu.Unlock()
	// A process started between waves (a deploy) joins the burst in flight.
	if cur != nil {
		if _, err := f.announce(ctx, p, *cur); err != nil {
			return &fleetApp{f: f, p: p}, err
		}
	}
	return &fleetApp{f: f, p: p}, nil
}

func (f *Fleet) liveProcs() []*process {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*process(nil), f.live...)
}

func (f *Fleet) Reset(ctx context.Context, burst int) (runner.Subject, error) {
	f.burstOK.Store(0)
	var s runner.Subject
	if f.o.PerProcessStore {
		s = runner.Subject{Burst: burst}
		for _, p := range f.liveProcs() {
			j, err := p.post(ctx, "/reset?burst="+strconv.Itoa(burst), nil)
			if err != nil {
				return s, err
			}
			s.Key = j.Key
		}
	} else {
		var err error
		if s, err = f.o.Control.Reset(ctx, burst); err != nil {
			return s, err
		}
		for _, p := range f.liveProcs() {
			if _, err := f.announce(ctx, p, s); err != nil {
				return s, err
			}
		}
	}
	f.mu.Lock()
	f.cur = &s
	f.mu.Unlock()
	return s, nil
}

// announce gives p the burst's subject.
func (f *Fleet) announce(ctx context.Context, p *process, s runner.Subject) (SubjectJSON, error) {
	if f.o.PerProcessStore {
		return p.post(ctx, "/reset?burst="+strconv.Itoa(s.Burst), nil)
	}
	body, _ := json.Marshal(EncodeSubject(s))
	return p.post(ctx, "/subject", body)
}

func (f *Fleet) Effects(ctx context.Context, s runner.Subject) (int, error) {
	if f.burstOK.Load() == 0 {
		first, _ := f.firstErr.Load().(string)
		return 0, fmt.Errorf("no attempt of burst %d reached the scenario in the replica processes (first error: %s)", s.Burst, first)
	}
	if !f.o.PerProcessStore {
		return f.o.Control.Effects(ctx, s)
	}
	f.mu.Lock()
	n := f.departed[s.Burst]
	delete(f.departed, s.Burst)
	f.mu.Unlock()
	for _, p := range f.liveProcs() {
		k, err := p.effects(ctx, s.Burst)
		if err != nil {
			return 0, err
		}
		n += k
	}
	return n, nil
}

func (f *Fleet) Server() string {
	if d, ok := f.o.Control.(runner.Describer); ok {
		return d.Server()
	}
	return ""
}

func (f *Fleet) Allowed(s runner.Subject, outcomes [runner.NumClasses]int) int {
	if a, ok := f.o.Control.(runner.Allowancer); ok {
		return a.Allowed(s, outcomes)
	}
	return f.o.Allowed
}

// Checks fails the run when attempts failed inside the replica processes:
// an error there (a store the process could not use, a replica that died)
// means the bursts did not test the pattern, whatever the effects say.
func (f *Fleet) Checks(context.Context) []runner.Check {
	n, failed := f.attempts.Load(), f.failed.Load()
	c := runner.Check{Name: "attempts ran in the replica processes", OK: failed == 0,
		Detail: fmt.Sprintf("%d of %d attempts failed with an error", failed, n)}
	if first, _ := f.firstErr.Load().(string); failed > 0 {
		c.Detail += " (first: " + first + "); the bursts prove nothing"
	}
	return []runner.Check{c}
}

func (f *Fleet) Notes() []string {
	var notes []string
	if n, ok := f.o.Control.(runner.Noter); ok {
		notes = append(notes, n.Notes()...)
	}
	f.mu.Lock()
	var procs []string
	for i, p := range f.started {
		if i == 6 {
			procs = append(procs, fmt.Sprintf("… %d processes in all (each deploy restarts them)", len(f.started)))
			break
		}
		procs = append(procs, fmt.Sprintf("replica %d pid %d (%s)", p.replica, p.pid, p.addr))
	}
	f.mu.Unlock()
	if len(procs) > 0 {
		notes = append(notes, "replicas ran as processes ('racetest serve'), attempts spread round-robin: "+strings.Join(procs, ", "))
	}
	if f.o.PerProcessStore {
		notes = append(notes, "memory backend: each process has its own store and the processes share no state, so only memory-set (whose point that is) is meaningful here; the effects are summed over the processes")
	}
	return notes
}

// fleetApp is one replica process.
type fleetApp struct {
	f *Fleet
	p *process
}

func (a *fleetApp) Session(ctx context.Context, worker int) (runner.Session, error) {
	s := &fleetSession{f: a.f, p: a.p, worker: worker, client: &http.Client{
		Transport: &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1, DisableCompression: true},
		Timeout:   a.f.o.Timeout,
	}}
	// Warm the worker's own keep-alive connection before any burst.
	if _, err := s.p.get(ctx, s.client, "/healthz"); err != nil {
		return nil, err
	}
	return s, nil
}

// Close stops the process. With a store per process, what it counted for
// the burst in flight is kept first: a deploy wipes memory, not effects.
func (a *fleetApp) Close() error {
	f := a.f
	f.mu.Lock()
	cur := f.cur
	for i, p := range f.live {
		if p == a.p {
			f.live = append(f.live[:i], f.live[i+1:]...)
			break
		}
	}
	f.mu.Unlock()
	if f.o.PerProcessStore && cur != nil && a.p.running() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if n, err := a.p.effects(ctx, cur.Burst); err == nil {
			f.mu.Lock()
			f.departed[cur.Burst] += n
			f.mu.Unlock()
		}
		cancel()
	}
	return a.p.stop()
}

type fleetSession struct {
	f      *Fleet
	p      *process
	worker int
	client *http.Client
}

func (s *fleetSession) Attempt(ctx context.Context, subj runner.Subject, w *runner.Worker) runner.Outcome {
	o := s.attempt(ctx, subj, w)
	s.f.attempts.Add(1)
	switch o.Class {
	case runner.Error, runner.Unknown:
		if o.Class == runner.Error {
			s.f.failed.Add(1)
		}
		if o.Err != nil {
			s.f.firstErr.CompareAndSwap(nil, o.Err.Error())
		}
	default:
		s.f.burstOK.Add(1)
	}
	return o
}

func (s *fleetSession) attempt(ctx context.Context, subj runner.Subject, w *runner.Worker) runner.Outcome {
	var wrote atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { wrote.Store(true) }})
	u := fmt.Sprintf("%s/attempt?burst=%d&worker=%d&wave=%d", s.p.base, subj.Burst, w.ID, w.Wave)
	req, err := http.NewRequestWithContext(ctx, "POST", u, http.NoBody)
	if err != nil {
		return runner.Failed(err)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		if !wrote.Load() {
			return runner.Failed(fmt.Errorf("replica %d (pid %d): %w", s.p.replica, s.p.pid, unwrapURL(err)))
		}
		return runner.Outcome{Class: runner.Unknown, Err: fmt.Errorf("replica %d (pid %d) did not answer (the attempt may have run): %w", s.p.replica, s.p.pid, unwrapURL(err))}
	}
	defer resp.Body.Close()
	var res AttemptResult
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err := json.Unmarshal(body, &res); err != nil {
		return runner.Failed(fmt.Errorf("replica %d answered HTTP %d: %s", s.p.replica, resp.StatusCode, strings.TrimSpace(string(body))))
	}
	class, ok := ClassOf(res.Outcome)
	if !ok {
		return runner.Failed(fmt.Errorf("replica %d answered an unknown outcome %q", s.p.replica, res.Outcome))
	}
	o := runner.Outcome{Class: class}
	if res.Error != "" {
		o.Err = errors.New(res.Error)
	}
	return o
}

func (s *fleetSession) Close() error {
	s.client.CloseIdleConnections()
	return nil
}

func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// process is one running replica.
type process struct {
	replica int
	pid     int
	addr    string
	base    string
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	stderr  *tail
	control *http.Client
	done    chan struct{}

	stopOnce sync.Once
	stopErr  error
}

func start(ctx context.Context, o FleetOptions, replica, workers int) (*process, error) {
	cmd := exec.Command(o.Executable, o.Args(replica, workers)...)
	cmd.Env = o.Env
	cmd.SysProcAttr = sysProcAttr()
	// A grandchild holding the output pipes open must not hang Wait.
	cmd.WaitDelay = 2 * time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	lines := &firstLine{ch: make(chan string, 1)}
	p := &process{replica: replica, cmd: cmd, stdin: stdin, stderr: &tail{max: 4 << 10}, done: make(chan struct{}),
		control: &http.Client{Timeout: 10 * time.Second}}
	cmd.Stdout, cmd.Stderr = lines, p.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start replica %d (%s): %w", replica, o.Executable, err)
	}
	p.pid = cmd.Process.Pid
	go func() {
		cmd.Wait()
		close(p.done)
	}()
	timer := time.NewTimer(o.StartTimeout)
	defer timer.Stop()
	select {
	case line := <-lines.ch:
		addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening on http://")
		if !ok {
			p.stop()
			return p, fmt.Errorf("replica %d (pid %d) did not say where it listens (first line %q)%s", replica, p.pid, line, p.stderr.says())
		}
		p.addr, p.base = addr, "http://"+addr
	case <-p.done:
		return p, fmt.Errorf("replica %d (pid %d) exited before it listened (%s)%s", replica, p.pid, cmd.ProcessState, p.stderr.says())
	case <-timer.C:
		p.stop()
		return p, fmt.Errorf("replica %d (pid %d) did not listen within %s%s", replica, p.pid, o.StartTimeout, p.stderr.says())
	case <-ctx.Done():
		p.stop()
		return p, context.Cause(ctx)
	}
	return p, nil
}

func (p *process) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// stop asks the process to stop (its standard input closes, then SIGTERM to
// its process group), kills it if it has not stopped within 5s, and reaps it.
func (p *process) stop() error {
	p.stopOnce.Do(func() {
		p.stdin.Close()
		terminate(p.cmd.Process)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			kill(p.cmd.Process)
			<-p.done
			p.stopErr = fmt.Errorf("replica %d (pid %d) did not stop within 5s of SIGTERM and was killed", p.replica, p.pid)
		}
		p.control.CloseIdleConnections()
	})
	return p.stopErr
}

func (p *process) post(ctx context.Context, path string, body []byte) (SubjectJSON, error) {
	var j SubjectJSON
	req, err := http.NewRequestWithContext(ctx, "POST", p.base+path, bytes.NewReader(body))
	if err != nil {
		return j, err
	}
	b, err := p.do(req)
	if err != nil {
		return j, err
	}
	if err := json.Unmarshal(b, &j); err != nil {
		return j, fmt.Errorf("replica %d (pid %d): POST %s answered %q", p.replica, p.pid, path, b)
	}
	return j, nil
}

func (p *process) get(ctx context.Context, c *http.Client, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", p.base+path, nil)
	if err != nil {
		return nil, err
	}
	if c == nil {
		return p.do(req)
	}
	return p.doWith(c, req)
}

func (p *process) effects(ctx context.Context, burst int) (int, error) {
	b, err := p.get(ctx, nil, "/effects?burst="+strconv.Itoa(burst))
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("replica %d (pid %d): effects of burst %d: %q is not a number", p.replica, p.pid, burst, b)
	}
	return n, nil
}

func (p *process) do(req *http.Request) ([]byte, error) { return p.doWith(p.control, req) }

func (p *process) doWith(c *http.Client, req *http.Request) ([]byte, error) {
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("replica %d (pid %d): %s %s: %w%s", p.replica, p.pid, req.Method, req.URL.Path, unwrapURL(err), p.stderr.says())
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("replica %d (pid %d): %s %s: HTTP %d: %s", p.replica, p.pid, req.Method, req.URL.Path, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return b, nil
}

// firstLine hands on the first line written to it and drops the rest.
type firstLine struct {
	mu   sync.Mutex
	buf  []byte
	sent bool
	ch   chan string
}

func (f *firstLine) Write(b []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sent {
		return len(b), nil
	}
	f.buf = append(f.buf, b...)
	if i := bytes.IndexByte(f.buf, '\n'); i >= 0 {
		f.sent = true
		f.ch <- string(f.buf[:i])
		f.buf = nil
	} else if len(f.buf) > 4<<10 {
		f.sent = true
		f.ch <- string(f.buf)
	}
	return len(b), nil
}

// tail keeps the last max bytes written to it: a replica's last words.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if len(t.buf) > t.max {
		t.buf = t.buf[len(t.buf)-t.max:]
	}
	return len(b), nil
}

// says is the replica's stderr, for an error message ("" when silent).
func (t *tail) says() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.TrimSpace(string(t.buf))
	if s == "" {
		return ""
	}
	return "; it said: " + s
}
