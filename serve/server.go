// Package serve runs a scenario as the API server of the incident stories:
// a small HTTP replica whose every request is one attempt at the guarded
// action. Fleet starts R such replicas as real processes and drives them as
// a round-robin load balancer would.
//
// A replica's endpoints:
//
//	POST /attempt?burst=B[&worker=W][&wave=V]  one attempt: 200 executed, 409 declined,
//	                                            503 conflict, 500 error, 504 unknown
//	POST /reset?burst=B                         make burst B's subject (the replica's own Reset)
//	POST /subject                               adopt a subject made elsewhere (JSON)
//	GET  /effects?burst=B                       the effects of burst B, as a number
//	GET  /arrivals?burst=B                      when each attempt of B arrived (Unix ns)
//	GET  /healthz                               who is serving: pid, scenario, replica
//
// Instead of ?burst=B a client may name the subject with any ?key=K (a fresh
// token per burst), so that runs from several clients never share one.
//
// Every /attempt answer carries the instant its request arrived in the
// X-Racetest-Arrival header, so a client measures the arrival spread here.
package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/racetest/racetest/httpfire"
	"github.com/racetest/racetest/runner"
)

// Options configure a replica.
type Options struct {
	// Target is the scenario on its backend.
	Target runner.Target
	// Name says what is served, e.g. "memory-set on memory".
	Name string
	// Replica is this replica's number (worker marks and lease owners
	// carry it).
	Replica int
	// Workers is how many sessions (connections to the store) to open up
	// front; more are opened when more attempts arrive at once.
	Workers int
	// Attached: a parent process owns the run. It prepares and cleans up
	// the store and announces each burst's subject; this replica only
	// attempts (after Attach, when the target is an Attacher). Otherwise
	// the replica prepares the store itself, makes a burst's subject on its
	// first attempt, and cleans up on Close.
	Attached bool
	// Timeout bounds each attempt (0: none); past it the attempt is unknown.
	Timeout time.Duration
}

// Attacher is a target that must find what its parent's Prepare made before
// an attached replica can attempt (MySQL checks its tables exist). Attach
// neither creates nor, later, drops anything: the parent owns the store.
// Targets whose names derive from the run id alone need no Attach.
type Attacher interface {
	Attach(ctx context.Context) error
}

// keepBursts bounds the subjects and arrivals a replica remembers.
const keepBursts = 4096

// Server is one replica.
type Server struct {
	o   Options
	app runner.App
	pid int

	poolMu   sync.Mutex
	free     []runner.Session
	all      []runner.Session
	opened   int
	workerID atomic.Int64

	mu       sync.Mutex
	subjects map[int]*entry
	arrivals map[int][]int64
	order    []int
	keys     map[string]int // ?key=K: the burst number K was given
	closed   bool
}

// entry is one burst's subject, made once.
type entry struct {
	once sync.Once
	s    runner.Subject
	err  error
}

// New prepares the store (or, attached, attaches to it), opens the replica and its first
// sessions.
func New(ctx context.Context, o Options) (*Server, error) {
	if o.Workers < 1 {
		o.Workers = 1
	}
	s := &Server{o: o, pid: os.Getpid(), subjects: map[int]*entry{}, arrivals: map[int][]int64{}, keys: map[string]int{}}
	s.workerID.Store(1 << 20) // ids the parent never gives: it numbers from 0
	if !o.Attached {
		if err := o.Target.Prepare(ctx); err != nil {
			return nil, fmt.Errorf("prepare: %w", err)
		}
	} else if a, ok := o.Target.(Attacher); ok {
		if err := a.Attach(ctx); err != nil {
			return nil, fmt.Errorf("attach to the run's store: %w", err)
		}
	}
	app, err := o.Target.Open(ctx, o.Replica, o.Workers)
	if err != nil {
		s.cleanup(ctx)
		return nil, fmt.Errorf("open the replica: %w", err)
	}
	s.app = app
	for range o.Workers {
		sess, err := s.newSession(ctx)
		if err != nil {
			s.Close(ctx)
			return nil, err
		}
		s.free = append(s.free, sess)
	}
	return s, nil
}

func (s *Server) newSession(ctx context.Context) (runner.Session, error) {
	s.poolMu.Lock()
	i := s.opened
	s.opened++
	s.poolMu.Unlock()
	sess, err := s.app.Session(ctx, i)
	if err != nil {
		return nil, fmt.Errorf("open session %d: %w", i, err)
	}
	s.poolMu.Lock()
	s.all = append(s.all, sess)
	s.poolMu.Unlock()
	return sess, nil
}

func (s *Server) acquire(ctx context.Context) (runner.Session, error) {
	s.poolMu.Lock()
	if n := len(s.free); n > 0 {
		sess := s.free[n-1]
		s.free = s.free[:n-1]
		s.poolMu.Unlock()
		return sess, nil
	}
	s.poolMu.Unlock()
	return s.newSession(ctx)
}

func (s *Server) release(sess runner.Session) {
	s.poolMu.Lock()
	s.free = append(s.free, sess)
	s.poolMu.Unlock()
}

// Close closes the sessions and the replica, and cleans up the store unless
// attached.
func (s *Server) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.poolMu.Lock()
	all := s.all
	s.all, s.free = nil, nil
	s.poolMu.Unlock()
	for _, sess := range all {
		sess.Close()
	}
	if s.app != nil {
		s.app.Close()
	}
	return s.cleanup(ctx)
}

func (s *Server) cleanup(ctx context.Context) error {
	var err error
	if !s.o.Attached {
		err = s.o.Target.Cleanup(ctx)
	}
	if c, ok := s.o.Target.(runner.Closer); ok {
		c.Close()
	}
	return err
}

// Handler serves the replica's endpoints.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /attempt", s.attempt)
	mux.HandleFunc("POST /reset", s.reset)
	mux.HandleFunc("POST /subject", s.adopt)
	mux.HandleFunc("GET /effects", s.effects)
	mux.HandleFunc("GET /arrivals", s.arrivalsOf)
	mux.HandleFunc("GET /healthz", s.health)
	return mux
}

// AttemptResult is the body of an /attempt answer.
type AttemptResult struct {
	Outcome   string `json:"outcome"`
	Error     string `json:"error,omitempty"`
	Burst     int    `json:"burst"`
	Worker    int    `json:"worker"`
	Replica   int    `json:"replica"`
	PID       int    `json:"pid"`
	ArrivalNS int64  `json:"arrival_ns"`
}

// statusOf is the HTTP status an outcome class answers with.
var statusOf = [runner.NumClasses]int{
	runner.Executed: http.StatusOK,
	runner.Declined: http.StatusConflict,
	runner.Conflict: http.StatusServiceUnavailable,
	runner.Error:    http.StatusInternalServerError,
	runner.Unknown:  http.StatusGatewayTimeout,
}

// ClassOf reads an outcome class back from its name.
func ClassOf(name string) (runner.Class, bool) {
	for _, c := range runner.Classes() {
		if c.String() == name {
			return c, true
		}
	}
	return 0, false
}

func (s *Server) attempt(w http.ResponseWriter, r *http.Request) {
	// The request has arrived when its body is in: that is when a handler
	// can act on it, and what a held-back final byte or frame delays.
	if _, err := io.Copy(io.Discard, r.Body); err != nil {
		httpError(w, http.StatusBadRequest, "reading the request body: %v", err)
		return
	}
	arrival := time.Now().UnixNano()
	w.Header().Set(httpfire.ArrivalHeader, strconv.FormatInt(arrival, 10))
	burst, err := s.burstOf(r)
	if err != nil {
		httpError(w, http.StatusBadRequest, "POST /attempt: %v", err)
		return
	}
	worker, err := intParam(r, "worker", -1)
	if err != nil {
		httpError(w, http.StatusBadRequest, "worker: %v", err)
		return
	}
	if worker < 0 {
		worker = int(s.workerID.Add(1))
	}
	wave, err := intParam(r, "wave", 0)
	if err != nil {
		httpError(w, http.StatusBadRequest, "wave: %v", err)
		return
	}
	s.recordArrival(burst, arrival)
	subj, err := s.subject(r.Context(), burst)
	if err != nil {
		httpError(w, http.StatusConflict, "%v", err)
		return
	}
	ctx := r.Context()
	if s.o.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, s.o.Timeout, runner.ErrTimeout)
		defer cancel()
	}
	sess, err := s.acquire(ctx)
	if err != nil {
		s.answer(w, AttemptResult{Outcome: runner.Error.String(), Error: err.Error(), Burst: burst, Worker: worker, ArrivalNS: arrival}, runner.Error)
		return
	}
	o := sess.Attempt(ctx, subj, &runner.Worker{ID: worker, Replica: s.o.Replica, Wave: wave})
	s.release(sess)
	if o.Class == runner.Error && errors.Is(context.Cause(ctx), runner.ErrTimeout) {
		o.Class = runner.Unknown
	}
	res := AttemptResult{Outcome: o.Class.String(), Burst: burst, Worker: worker, ArrivalNS: arrival}
	if o.Err != nil {
		res.Error = o.Err.Error()
	}
	s.answer(w, res, o.Class)
}

func (s *Server) answer(w http.ResponseWriter, res AttemptResult, c runner.Class) {
	res.Replica, res.PID = s.o.Replica, s.pid
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Racetest-Outcome", res.Outcome)
	w.WriteHeader(statusOf[c])
	json.NewEncoder(w).Encode(res)
}

func (s *Server) recordArrival(burst int, at int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.arrivals[burst]; !ok {
		s.remember(burst)
	}
	s.arrivals[burst] = append(s.arrivals[burst], at)
}

// remember keeps the last keepBursts bursts; call with s.mu held.
func (s *Server) remember(burst int) {
	s.order = append(s.order, burst)
	if len(s.order) > keepBursts {
		old := s.order[0]
		s.order = s.order[1:]
		delete(s.subjects, old)
		delete(s.arrivals, old)
	}
}

// subject returns burst's subject: made here on first use when the replica
// runs alone, announced by the parent when attached.
func (s *Server) subject(ctx context.Context, burst int) (runner.Subject, error) {
	s.mu.Lock()
	e, ok := s.subjects[burst]
	if !ok {
		if s.o.Attached {
			s.mu.Unlock()
			return runner.Subject{}, fmt.Errorf("burst %d was not announced to this replica (POST /subject or /reset first)", burst)
		}
		e = &entry{}
		s.subjects[burst] = e
		if _, seen := s.arrivals[burst]; !seen {
			s.remember(burst)
		}
	}
	s.mu.Unlock()
	e.once.Do(func() { e.s, e.err = s.o.Target.Reset(context.WithoutCancel(ctx), burst) })
	return e.s, e.err
}

func (s *Server) set(burst int, subj runner.Subject) {
	e := &entry{s: subj}
	e.once.Do(func() {})
	s.mu.Lock()
	if _, ok := s.subjects[burst]; !ok {
		if _, seen := s.arrivals[burst]; !seen {
			s.remember(burst)
		}
	}
	s.subjects[burst] = e
	s.mu.Unlock()
}

func (s *Server) reset(w http.ResponseWriter, r *http.Request) {
	burst, err := s.burstOf(r)
	if err != nil {
		httpError(w, http.StatusBadRequest, "POST /reset: %v", err)
		return
	}
	subj, err := s.o.Target.Reset(r.Context(), burst)
	if err != nil {
		httpError(w, http.StatusInternalServerError, "reset burst %d: %v", burst, err)
		return
	}
	s.set(burst, subj)
	writeJSON(w, EncodeSubject(subj))
}

func (s *Server) adopt(w http.ResponseWriter, r *http.Request) {
	var j SubjectJSON
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&j); err != nil {
		httpError(w, http.StatusBadRequest, "POST /subject needs a subject as JSON: %v", err)
		return
	}
	subj, opaque, err := j.Decode()
	if err != nil {
		httpError(w, http.StatusBadRequest, "POST /subject: %v", err)
		return
	}
	if opaque {
		// The subject's data is not a plain value: make it again here. The
		// backends whose subjects carry such data make them idempotently.
		if subj, err = s.o.Target.Reset(r.Context(), j.Burst); err != nil {
			httpError(w, http.StatusInternalServerError, "re-deriving burst %d's subject: %v", j.Burst, err)
			return
		}
	}
	s.set(j.Burst, subj)
	writeJSON(w, EncodeSubject(subj))
}

func (s *Server) effects(w http.ResponseWriter, r *http.Request) {
	burst, err := s.burstOf(r)
	if err != nil {
		httpError(w, http.StatusBadRequest, "GET /effects: %v", err)
		return
	}
	s.mu.Lock()
	_, ok := s.subjects[burst]
	s.mu.Unlock()
	if !ok {
		// No attempt reached this replica for the burst: nothing happened here.
		fmt.Fprintln(w, 0)
		return
	}
	subj, err := s.subject(r.Context(), burst)
	if err != nil {
		httpError(w, http.StatusInternalServerError, "burst %d has no subject: %v", burst, err)
		return
	}
	n, err := s.o.Target.Effects(r.Context(), subj)
	if err != nil {
		httpError(w, http.StatusInternalServerError, "count the effects of burst %d: %v", burst, err)
		return
	}
	fmt.Fprintln(w, n)
}

// Arrivals is the body of an /arrivals answer.
type Arrivals struct {
	Burst    int     `json:"burst"`
	Arrivals []int64 `json:"arrivals_ns"`
	SpreadUS float64 `json:"spread_us"`
}

func (s *Server) arrivalsOf(w http.ResponseWriter, r *http.Request) {
	burst, err := s.burstOf(r)
	if err != nil {
		httpError(w, http.StatusBadRequest, "GET /arrivals: %v", err)
		return
	}
	s.mu.Lock()
	a := append([]int64(nil), s.arrivals[burst]...)
	s.mu.Unlock()
	sort.Slice(a, func(i, j int) bool { return a[i] < a[j] })
	res := Arrivals{Burst: burst, Arrivals: a}
	if len(a) > 1 {
		res.SpreadUS = float64(a[len(a)-1]-a[0]) / 1e3
	}
	writeJSON(w, res)
}

// Health is the body of a /healthz answer.
type Health struct {
	PID      int    `json:"pid"`
	Name     string `json:"name"`
	Replica  int    `json:"replica"`
	Attached bool   `json:"attached"`
}

func (s *Server) health(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, Health{PID: s.pid, Name: s.o.Name, Replica: s.o.Replica, Attached: s.o.Attached})
}

// burstOf reads the burst a request is about: ?burst=N, or ?key=K for a
// client that names its subjects (a fresh token per burst), which is given
// a burst number of its own here.
func (s *Server) burstOf(r *http.Request) (int, error) {
	if k := r.URL.Query().Get("key"); k != "" {
		if len(k) > 200 {
			return 0, errors.New("key is longer than 200 characters")
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		n, ok := s.keys[k]
		if !ok {
			n = len(s.keys) + 1<<30 // never a burst number a parent announces
			if len(s.keys) >= keepBursts*4 {
				s.keys = map[string]int{}
			}
			s.keys[k] = n
		}
		return n, nil
	}
	n, err := intParam(r, "burst", -1)
	if err == nil && n < 0 {
		err = errors.New("give the subject as ?burst=N (a whole number ≥ 0) or ?key=K")
	}
	return n, err
}

func intParam(r *http.Request, name string, def int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("%s=%q is not a whole number", name, v)
	}
	return n, nil
}

func httpError(w http.ResponseWriter, code int, format string, a ...any) {
	http.Error(w, fmt.Sprintf(format, a...), code)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}
