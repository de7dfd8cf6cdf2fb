package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/racetest/racetest/httpfire"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/redisstore"
	"github.com/racetest/racetest/scenarios/runs"
)

// The HTTP backends: a check-then-write endpoint the bench serves itself,
// over HTTP/1.1 and h2c on one port (the database-backed ones, HTTPPostgres
// and HTTPMySQL, are in httpsql.go).
const (
	// HTTPSpin checks an in-memory flag, spins Config.HTTPWindow, then
	// writes it.
	HTTPSpin = "http-spin"
	// HTTPRedis checks with EXISTS and writes with RPUSH on the local
	// Redis, under a prefix of its own that it deletes at the end.
	HTTPRedis = "http-redis"
)

// HTTPBackends are the HTTP backends, in the order they run.
var HTTPBackends = []string{HTTPSpin, HTTPRedis, HTTPPostgres, HTTPMySQL}

// IsHTTP reports whether backend is one of HTTPBackends.
func IsHTTP(backend string) bool { return slices.Contains(HTTPBackends, backend) }

// The HTTP modes: every release mode of 'racetest http' (LastByte and
// Naive are spelt as the servers' modes are), and a launcher as a user
// writes it.
const (
	Auto         = string(httpfire.Auto)
	Barrier      = string(httpfire.Barrier)
	SinglePacket = string(httpfire.SinglePacket)
	UserHTTP     = "user-http"
)

// UserHTTPIdiom is how the user-style HTTP launcher fires.
const UserHTTPIdiom = "one net/http.Client on a clone of http.DefaultTransport (its defaults: HTTP/1.1 over http://, " +
	"keep-alive, 2 idle connections per host); a goroutine per request, all parked on one channel, released by close; client.Do(POST)"

// HTTPModes are the modes the bench compares on an HTTP backend: every
// release mode 'racetest http' offers, then the user-style launcher.
func HTTPModes() []string {
	var out []string
	for _, r := range httpfire.Releases() {
		out = append(out, string(r))
	}
	return append(out, UserHTTP)
}

// Defaults of the HTTP backends.
var DefaultHTTPAttempts = []int{2, 20, 64}

// DefaultHTTPWindow is the spin target's window between check and write.
const DefaultHTTPWindow = 100 * time.Microsecond

// httpTimeout bounds each request, as 'racetest http' bounds them by default.
const httpTimeout = httpfire.DefaultTimeout

// DefaultModeOf is the mode racetest uses by default on backend: auto over
// HTTP (single-packet on these targets, which speak h2c), last-byte on the
// servers (release.Auto chooses it on all of them).
func DefaultModeOf(backend string) string {
	if IsHTTP(backend) {
		return Auto
	}
	return DefaultMode
}

// httpModes are the modes measured on backend, an HTTP one: those of
// HTTPModes, and on a database-backed one Proxy.
func (c *Config) httpModes(backend string) []string {
	all := HTTPModes()
	if IsSQLHTTP(backend) {
		all = append(all, Proxy)
	}
	if len(c.HTTPModes) > 0 {
		all = c.HTTPModes
	}
	var out []string
	for _, m := range all {
		if m == Proxy && !IsSQLHTTP(backend) {
			continue // nothing to proxy: the target has no database
		}
		if len(c.HTTPModes) > 0 || len(c.Modes) == 0 || slices.Contains(c.Modes, m) {
			out = append(out, m)
		}
	}
	return out
}

// httpConfig is the request 'racetest http' would be given for mode:
//
//	racetest http -X POST 'URL/?key={{.Token}}' -d '{"attempt": {{.Attempt}}}' \
//	  --effects 'http:URL/count?key={{.Token}}' --release MODE
func httpConfig(url, mode string) httpfire.Config {
	return httpfire.Config{
		Method:  "POST",
		URL:     url + "/?key={{.Token}}",
		Body:    `{"attempt": {{.Attempt}}}`,
		Effects: "http:" + url + "/count?key={{.Token}}",
		Release: httpfire.Release(mode),
		Timeout: httpTimeout,
	}
}

func runHTTPBackend(ctx context.Context, cfg *Config, rep *Report, backend string) error {
	if !IsHTTP(backend) {
		return fmt.Errorf("no HTTP target %q (known: %s)", backend, strings.Join(HTTPBackends, ", "))
	}
	modes := cfg.httpModes(backend)
	if len(modes) == 0 {
		return nil
	}
	ns := cfg.httpAttempts()
	if IsSQLHTTP(backend) {
		var over []int
		if ns, over = sqlHTTPAttempts(ns); len(over) > 0 {
			rep.addNote(fmt.Sprintf("%s: N=%s not measured: the service's pools hold %d connections each (one straight to the server, one through the proxy, within its max_connections)",
				backend, joinInts(over), sqlHTTPMaxAttempts))
		}
		if len(ns) == 0 {
			return nil
		}
	}
	prefix := ""
	if backend != HTTPSpin {
		prefix = runs.Prefix(scenarios.NewRunID()) + "bench_http_"
		rep.Prefixes[backend] = append(rep.Prefixes[backend], prefix)
	}
	var bad *scenarios.ParamError
	control, proxied := "", ""
	if slices.Contains(modes, Proxy) {
		// Started before the target and stopped after it (the defers run
		// in turn): the target's proxied pool connects to it.
		px, err := startProxy(ctx, cfg.Conn, backend)
		if errors.As(err, &bad) {
			return err
		}
		if err != nil {
			return &skipError{err}
		}
		defer px.Close()
		control, proxied = px.ControlAddr(), px.ServiceURL()
		rep.addNote(fmt.Sprintf("%s %s: %s", backend, Proxy, ProxyIdiom))
	}
	serve := serveInProcess
	if cfg.TargetExecutable != "" {
		serve = serveProcess(cfg.TargetExecutable)
	}
	url, desc, stop, err := serve(ctx, cfg, backend, prefix, proxied)
	if errors.As(err, &bad) {
		return err
	}
	if err != nil {
		return &skipError{err}
	}
	defer func() {
		if err := stop(context.WithoutCancel(ctx)); err != nil && cfg.Progress != nil {
			cfg.Progress(err.Error())
		}
	}()
	rep.Servers[backend] = desc
	for _, n := range ns {
		if cfg.Progress != nil {
			cfg.Progress(fmt.Sprintf("%s N=%d", backend, n))
		}
		c := &httpCell{cfg: cfg, backend: backend, n: n, modes: modes, url: url, control: control}
		err := c.run(ctx, rep)
		c.close(ctx)
		if err != nil {
			return err
		}
		c.report(rep)
	}
	if cfg.inspect != nil {
		cfg.inspect(backend, prefix)
	}
	return nil
}

func joinInts(ns []int) string {
	var s []string
	for _, n := range ns {
		s = append(s, strconv.Itoa(n))
	}
	return strings.Join(s, ",")
}

// serveFunc serves backend's target: its URL, what it is, and how to stop
// it (deleting what it made under prefix). proxied is the service URL of a
// database proxy for the target's proxied pool ("" for none). An error is
// a target that could not start (a server it needs did not answer).
type serveFunc func(ctx context.Context, cfg *Config, backend, prefix, proxied string) (url, desc string, stop func(context.Context) error, err error)

// newActor is backend's check and write, and what it is; proxied is the
// service URL of the proxy a database-backed target's proxied pool
// connects to ("" for none).
func newActor(ctx context.Context, cfg *Config, backend, prefix, proxied string) (actor, string, error) {
	if backend == HTTPSpin {
		return newSpinActor(cfg.HTTPWindow), fmt.Sprintf("in-memory flag, a %s spin between check and write", us(cfg.HTTPWindow)), nil
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if IsSQLHTTP(backend) {
		a, err := newSQLActor(cctx, backend, sqlConn(cfg.Conn, backend), proxied, prefix)
		if err != nil {
			return nil, "", err
		}
		return a, a.desc(), nil
	}
	a, err := newRedisActor(cctx, cfg.Conn.Get(redisstore.Name), prefix)
	if err != nil {
		return nil, "", err
	}
	return a, "EXISTS then RPUSH on Redis at " + a.rdb.Options().Addr, nil
}

// serveInProcess serves the target from the bench's own process, when
// Config.TargetExecutable is unset (tests): no process to start, at the
// price of sharing the Go runtime (and its two Ps, here) with the client.
// racetest bench serves its targets from a process of their own
// (serveProcess).
func serveInProcess(ctx context.Context, cfg *Config, backend, prefix, proxied string) (string, string, func(context.Context) error, error) {
	act, desc, err := newActor(ctx, cfg, backend, prefix, proxied)
	if err != nil {
		return "", "", nil, err
	}
	srv, err := startHTTPServer(newHTTPTarget(act))
	if err != nil {
		act.close()
		return "", "", nil, err
	}
	stop := func(ctx context.Context) error {
		srv.close()
		defer act.close()
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		return act.cleanup(ctx)
	}
	return srv.URL, "in-process net/http (HTTP/1.1 and h2c), " + desc, stop, nil
}

// httpCell is one HTTP backend × N: a 'racetest http' target per release
// mode, the user-style launcher's client, and the tallies.
type httpCell struct {
	cfg     *Config
	backend string
	n       int
	modes   []string
	url     string
	control string // the proxy's control address, for the proxy mode
	fired   map[string]*httpfire.Target
	reused  map[string]*reused
	client  *http.Client
	userAt  int // bursts the user-style launcher fired so far
	rows    map[string]*tally
	// warmArrivals: how many of each fired target's arrival spreads
	// belong to the warm-up (not reported).
	warmArrivals map[string]int
}

func (c *httpCell) run(ctx context.Context, rep *Report) error {
	c.fired, c.reused, c.rows = map[string]*httpfire.Target{}, map[string]*reused{}, map[string]*tally{}
	c.warmArrivals = map[string]int{}
	// The user's client; the writes are counted on it too, outside the
	// bursts' timing.
	c.client = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	for _, m := range c.modes {
		c.rows[m] = &tally{}
		if m == UserHTTP {
			continue
		}
		hc := httpConfig(c.url, m)
		if m == Proxy {
			// The default's release, at the endpoint on the proxied pool;
			// the writes counted as every mode's are.
			hc = httpConfig(c.url, Auto)
			hc.URL = c.url + proxiedPath + "/?key={{.Token}}"
			hc.Proxy = c.control
		}
		t, err := httpfire.New(hc, scenarios.Params{RunID: scenarios.NewRunID(), Attempts: c.n, Replicas: 1, Conn: c.cfg.Conn})
		if err != nil {
			return fmt.Errorf("%s: %w", m, err)
		}
		c.fired[m], c.reused[m] = t, &reused{Target: t}
	}
	if err := c.warmUp(ctx); err != nil {
		return err
	}
	rounds := (c.cfg.Bursts + c.cfg.Chunk - 1) / c.cfg.Chunk
	for r := range rounds {
		chunk := min(c.cfg.Chunk, c.cfg.Bursts-r*c.cfg.Chunk)
		for _, i := range turnOrder(len(c.modes), r) {
			mode := c.modes[i]
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			if err := c.chunk(ctx, mode, chunk); err != nil {
				return fmt.Errorf("check-then-write, N=%d, %s: %w", c.n, mode, err)
			}
		}
	}
	if t := c.fired[Auto]; t != nil && t.Release() != httpfire.Auto {
		// Settled: Choose asks nothing more, and says why it chose.
		why, _ := t.Choose(ctx)
		rep.addNote(fmt.Sprintf("%s: auto chose %s (%s)", c.backend, t.Release(), why))
	}
	return nil
}

// warmUp fires warmUpBursts of each mode, in the first round's order, and
// forgets them: the first bursts at a new N meet a server (and a client)
// that has never run that many requests at once, and whichever mode went
// first took that on its first chunk. Auto, first in the list, always did:
// at N=64 on http-redis its first chunk's median arrival spread was 3.6 ms
// against 1.1-1.7 ms in its others and single-packet's.
func (c *httpCell) warmUp(ctx context.Context) error {
	if warmUpBursts(c.cfg) == 0 {
		return nil
	}
	for _, i := range turnOrder(len(c.modes), 0) {
		mode := c.modes[i]
		if err := c.chunk(ctx, mode, warmUpBursts(c.cfg)); err != nil {
			return fmt.Errorf("warm-up, N=%d, %s: %w", c.n, mode, err)
		}
		c.rows[mode] = &tally{}
		if t := c.fired[mode]; t != nil {
			_, arrivals := t.Spreads()
			c.warmArrivals[mode] = len(arrivals)
		}
	}
	return nil
}

func (c *httpCell) chunk(ctx context.Context, mode string, bursts int) error {
	t := c.rows[mode]
	defer t.endChunk(t.bursts, t.exposed)
	if mode == UserHTTP {
		for range bursts {
			key := fmt.Sprintf("%s-%d-%d", mode, c.n, c.userAt)
			c.userAt++
			stamps := make([]int64, c.n)
			spread, overlap, errs := userBurst(ctx, c.n, func(ctx context.Context, worker int) error {
				at, err := c.userPost(ctx, key, worker)
				stamps[worker] = at
				return err
			})
			w, err := c.writes(ctx, key)
			if err != nil {
				return err
			}
			t.add(w > 1, spread, overlap, errs)
			if d, ok := stampSpread(stamps); ok {
				t.arrivals = append(t.arrivals, d)
			}
		}
		return nil
	}
	tg := c.reused[mode]
	res, err := runner.Run(ctx, tg, runner.Attempts(c.n), runner.Bursts(bursts), runner.Keep(true), runner.Timeout(httpTimeout))
	if res != nil {
		tg.offset += len(res.Bursts)
	}
	if err != nil {
		return err
	}
	for _, b := range res.Bursts {
		t.add(b.Violated(), b.Spread, b.Overlap, b.Outcomes[runner.Error]+b.Outcomes[runner.Unknown])
		if h := b.Hold; h != nil && !h.Untested && h.Met == c.n {
			t.met++
		}
	}
	return nil
}

// userPost is one attempt of the user-style launcher: the request 'racetest
// http' sends, on the user's client. It returns the target's arrival stamp
// (0 when there is none).
func (c *httpCell) userPost(ctx context.Context, key string, worker int) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url+"/?key="+key,
		bytes.NewReader(fmt.Appendf(nil, `{"attempt": %d}`, worker)))
	if err != nil {
		return 0, err
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body) //nolint:errcheck // the status is the answer
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusConflict {
		return 0, fmt.Errorf("%s", resp.Status)
	}
	at, _ := strconv.ParseInt(resp.Header.Get(httpfire.ArrivalHeader), 10, 64)
	return at, nil
}

// writes asks the target how many times it wrote key, as the effects check
// of 'racetest http' asks it (GET /count).
func (c *httpCell) writes(ctx context.Context, key string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, httpTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url+"/count?key="+key, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("counting the writes: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
	if err != nil {
		return 0, fmt.Errorf("counting the writes: %w", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("counting the writes: %s %q", resp.Status, b)
	}
	return n, nil
}

// stampSpread is first to last of a burst's arrival stamps (ns); false
// unless every attempt was stamped.
func stampSpread(stamps []int64) (time.Duration, bool) {
	if len(stamps) < 2 || slices.Contains(stamps, 0) {
		return 0, false
	}
	return time.Duration(slices.Max(stamps) - slices.Min(stamps)), true
}

func (c *httpCell) close(ctx context.Context) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	for _, t := range c.reused {
		t.drop(cctx)
	}
	c.client.CloseIdleConnections()
}

func (c *httpCell) report(rep *Report) {
	for _, m := range c.modes {
		t := c.rows[m]
		server := ""
		arrivals := t.arrivals
		if ft := c.fired[m]; ft != nil {
			server = ft.Server()
			_, arrivals = ft.Spreads()
			arrivals = arrivals[min(c.warmArrivals[m], len(arrivals)):]
		}
		arrival := time.Duration(-1)
		if len(arrivals) > 0 {
			arrival = median(arrivals)
		}
		idiom, chose := "", ""
		if m == UserHTTP {
			idiom = UserHTTPIdiom
		}
		if ft := c.fired[m]; m == Auto && ft != nil && ft.Release() != httpfire.Auto {
			chose = string(ft.Release())
		}
		rep.Rows = append(rep.Rows, Row{Idiom: idiom,
			Backend: c.backend, Server: server, Scenario: scenarios.CheckThenWrite, N: c.n, Mode: m,
			Bursts: t.bursts, Exposed: t.exposed, Spread: median(t.spreads), Overlap: median(t.overlaps),
			Arrival: arrival, Errors: t.errors, Chunks: t.chunks, ChunkBursts: t.chunkBursts, Met: t.met, Chose: chose,
		})
	}
}
