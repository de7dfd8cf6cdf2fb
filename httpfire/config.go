// Package httpfire is racetest's HTTP target: it fires each burst of a run at
// a real endpoint, releases the burst's requests together at the wire
// (barrier, last-byte or single-packet), classifies every response by a
// success rule, and counts what actually happened with an effects check.
//
// A Target is a runner.Target, so the runner and report do all the counting:
//
//	t, err := httpfire.New(httpfire.Config{Method: "POST", URL: "http://127.0.0.1:8080/redeem?code={{.Token}}",
//		Release: httpfire.LastByte, Effects: "http:http://127.0.0.1:8080/count?code={{.Token}}"}, params)
//	res, err := runner.Run(ctx, t, runner.Attempts(20), runner.Bursts(200))
package httpfire

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"text/template"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/racetest/racetest/internal/bounded"
)

// Release is how a burst's requests leave the client together.
type Release string

const (
	// Barrier: one warmed keep-alive connection per attempt; when the
	// runner's gate opens, every attempt writes its whole request.
	Barrier Release = "barrier"
	// LastByte (HTTP/1.1): before the gate each connection carries its whole
	// request but the held-back tail; on the gate one loop writes every tail.
	LastByte Release = "last-byte"
	// SinglePacket (HTTP/2): every request on one connection, each held back
	// by its final DATA frame; all final frames leave in one write.
	SinglePacket Release = "single-packet"
	// Naive is the reference a hand-written load script gives: a fresh
	// connection per request, dialled after the gate.
	Naive Release = "naive"
	// Auto (the default) is single-packet when the server negotiates HTTP/2
	// (ALPN h2 over TLS, h2c with prior knowledge over http://), else
	// last-byte: the target probes the server once, before the first burst
	// (Target.Choose), and its notes say what was chosen and why.
	Auto Release = "auto"
)

// Releases lists the release modes in the order the help text names them.
func Releases() []Release { return []Release{Auto, Barrier, LastByte, SinglePacket, Naive} }

// AttemptCost is what one attempt at an HTTP target costs racetest's
// memory, in bytes: its worker and marks, and its own connection's buffers.
const AttemptCost = 48 << 10

// DefaultTimeout bounds connecting, each request and each effects check.
const DefaultTimeout = 10 * time.Second

// MaxBodySize is the largest request body read from a file: /dev/zero,
// a pipe or a runaway file is refused at once.
const MaxBodySize = 16 << 20

// Config is one HTTP target as a command line or a suite file states it. The
// URL, header values, body and effects check are Go text/templates over Vars.
type Config struct {
	Method string `yaml:"method,omitempty" json:"method,omitempty"`
	URL    string `yaml:"url" json:"url"`
	// Headers are "Name: value" lines, as curl's -H takes them.
	Headers []string `yaml:"headers,omitempty" json:"headers,omitempty"`
	// Cookies are "name=value" pairs sent in one Cookie header.
	Cookies []string `yaml:"cookies,omitempty" json:"cookies,omitempty"`
	Body    string   `yaml:"body,omitempty" json:"body,omitempty"`
	// BodyFile names a file whose content is the body (a template too).
	BodyFile string  `yaml:"body_file,omitempty" json:"body_file,omitempty"`
	Success  Success `yaml:"success,omitempty" json:"success,omitempty"`
	// Effects is the ground-truth check run after each burst:
	// sql:mysql:QUERY, sql:postgres:QUERY, redis:COMMAND,
	// mongo:DB.COLLECTION:FILTER or http:URL (a GET returning a number);
	// or auto:postgres, auto:mysql: no count, each burst's change of the
	// store beside a solo twin's (run the target with runner.SoloTwins).
	Effects string `yaml:"effects,omitempty" json:"effects,omitempty"`
	// Watch names the tables an auto: check measures ({{.RunID}} is the
	// run's id); none, every table of the connection's schema.
	Watch []string `yaml:"watch,omitempty" json:"watch,omitempty"`
	// Invariants are checked before and after each burst, written as
	// Effects is: each returns how many times it is broken (0: it holds)
	// or a boolean that must hold. A burst that adds violations is a RACE.
	Invariants []string `yaml:"invariant,omitempty" json:"invariant,omitempty"`
	Release    Release  `yaml:"release,omitempty" json:"release,omitempty"`
	// Insecure skips TLS certificate verification (local targets).
	Insecure bool `yaml:"insecure,omitempty" json:"insecure,omitempty"`
	// Timeout bounds connecting and each effects check (default 10s).
	Timeout time.Duration `yaml:"timeout,omitempty" json:"timeout,omitempty"`
	// Warmup is a URL on the same host fetched once on every new HTTP/1.1
	// connection, before it is used for a burst.
	Warmup string `yaml:"warmup,omitempty" json:"warmup,omitempty"`
	// Setup is a request made before each burst, outside its timing, to
	// create the burst's subject: "METHOD URL" (a template), or a URL alone
	// for a POST — e.g. "POST http://host/coupons?code={{.Token}}". It must
	// answer 2xx.
	Setup string `yaml:"setup,omitempty" json:"setup,omitempty"`
	// CredentialsTo lists other hosts (host or host:port) that the setup
	// request and an http: effects check may send the burst's
	// Authorization header and cookies to. By default only the target's
	// own host gets them: a token must not leak to a host nobody named.
	CredentialsTo []string `yaml:"credentials_to,omitempty" json:"credentials_to,omitempty"`
	// Proxy is the control address of a racetest proxy that the service's
	// database connections go through (racetest proxy): during each burst
	// it holds every request's first write or lock until all of them have
	// reached one, so that the race happens on every burst.
	Proxy string `yaml:"proxy,omitempty" json:"proxy,omitempty"`
}

// Success decides that an attempt executed. With both fields set, both must
// hold; with neither, any 2xx status is success.
type Success struct {
	// Status lists codes ("200") and classes ("2xx").
	Status []string `yaml:"status,omitempty" json:"status,omitempty"`
	// Body is a regular expression the response body must match.
	Body string `yaml:"body,omitempty" json:"body,omitempty"`
	// Declined, when set, lists the only statuses that mean "already
	// done" ("409", "404"); any other failure is an error. By default a
	// 4xx is "already done" unless it refuses the request itself (401,
	// 403, 404, 405, 429, …).
	Declined []string `yaml:"declined,omitempty" json:"declined,omitempty"`
}

// Vars are what the templates see.
type Vars struct {
	// Burst is the burst's index, from 0.
	Burst int
	// Attempt is the attempt's index within the burst, from 0 (zero in the
	// effects check).
	Attempt int
	// Token is random, fresh for each burst: a subject no other burst shares.
	Token string
	// RunID is the run's id; Key is racetest_<RunID>_<Burst>.
	RunID string
	Key   string
}

// InputError is a Config that cannot be used: nothing was sent.
type InputError struct {
	Field string
	Err   error
}

func (e *InputError) Error() string { return e.Field + ": " + e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

func inputErrorf(field, format string, a ...any) error {
	return &InputError{Field: field, Err: fmt.Errorf(format, a...)}
}

// compiled is a validated Config.
type compiled struct {
	cfg      Config
	method   string
	release  Release
	auto     string // why auto chose release; "" when it was asked for by name
	url      *template.Template
	headers  []headerTemplate
	cookie   string
	body     *template.Template
	hasBody  bool
	rules    rules
	warmup   *url.URL
	setup    *template.Template // nil: no setup request
	setupM   string
	timeout  time.Duration
	scheme   string // http or https
	host     string // as in the Host header
	addr     string // host:port to dial
	hostname string // for TLS verification
}

type headerTemplate struct {
	name  string
	value *template.Template
}

func compile(c Config) (*compiled, error) {
	cc := &compiled{cfg: c, release: c.Release, timeout: c.Timeout}
	if cc.release == "" {
		cc.release = Auto
	}
	if !validRelease(cc.release) {
		return nil, inputErrorf("release", "unknown release mode %q (want one of: %s)", cc.release, releaseNames())
	}
	if cc.timeout == 0 {
		cc.timeout = DefaultTimeout
	}
	if cc.timeout < 0 {
		return nil, inputErrorf("timeout", "cannot be negative (got %s)", cc.timeout)
	}
	body := c.Body
	if c.BodyFile != "" {
		if c.Body != "" {
			return nil, inputErrorf("body", "give the body inline or as a file, not both")
		}
		b, err := bounded.ReadFile(c.BodyFile, MaxBodySize)
		if err != nil {
			return nil, inputErrorf("body_file", "%w (a body is read whole, up to %s)", err, bounded.Size(MaxBodySize))
		}
		body = string(b)
	}
	cc.hasBody = body != ""
	cc.method = strings.ToUpper(strings.TrimSpace(c.Method))
	if cc.method == "" {
		cc.method = "GET"
		if cc.hasBody {
			cc.method = "POST"
		}
	}
	if !httpguts.ValidHeaderFieldName(cc.method) {
		return nil, inputErrorf("method", "%q is not an HTTP method", c.Method)
	}
	var err error
	if cc.url, err = parseTemplate("url", c.URL); err != nil {
		return nil, err
	}
	if cc.body, err = parseTemplate("body", body); err != nil {
		return nil, err
	}
	for _, h := range c.Headers {
		name, value, ok := strings.Cut(h, ":")
		name = strings.TrimSpace(name)
		if !ok || !httpguts.ValidHeaderFieldName(name) {
			return nil, inputErrorf("header", "%q is not a header line (want \"Name: value\")", h)
		}
		switch strings.ToLower(name) {
		case "content-length", "transfer-encoding", "connection", "upgrade":
			return nil, inputErrorf("header", "%s is set by racetest (it must match how the request is framed and released); remove -H %q", name, h)
		}
		t, err := parseTemplate("header "+name, strings.TrimSpace(value))
		if err != nil {
			return nil, err
		}
		cc.headers = append(cc.headers, headerTemplate{name: name, value: t})
	}
	for _, ck := range c.Cookies {
		if k, _, ok := strings.Cut(ck, "="); !ok || strings.TrimSpace(k) == "" || strings.ContainsAny(ck, ";\r\n") {
			return nil, inputErrorf("cookie", "%q is not a cookie (want name=value)", ck)
		}
	}
	cc.cookie = strings.Join(c.Cookies, "; ")
	if cc.rules, err = compileRules(c.Success); err != nil {
		return nil, err
	}
	// The sample attempt validates every template and fixes the host: all of
	// a run's connections go to one host, whatever the templates vary.
	sample, err := cc.render(Vars{RunID: "sample", Key: "racetest_sample_0", Token: "0000000000000000"})
	if err != nil {
		return nil, err
	}
	u := sample.url
	cc.scheme, cc.host, cc.hostname = u.Scheme, u.Host, u.Hostname()
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	cc.addr = joinHostPort(cc.hostname, port)
	if c.Warmup != "" {
		w, err := parseTarget("warmup", c.Warmup)
		if err != nil {
			return nil, err
		}
		if w.Host != u.Host || w.Scheme != u.Scheme {
			return nil, inputErrorf("warmup", "%s must be on the target's host (%s://%s): it warms the connections the burst uses", w.Redacted(), u.Scheme, u.Host)
		}
		cc.warmup = w
	}
	if c.Setup != "" {
		method, raw, ok := strings.Cut(strings.TrimSpace(c.Setup), " ")
		if !ok {
			method, raw = "POST", method
		}
		cc.setupM = strings.ToUpper(method)
		if !httpguts.ValidHeaderFieldName(cc.setupM) {
			return nil, inputErrorf("setup", "%q is not an HTTP method (want \"METHOD URL\" or a URL)", method)
		}
		if cc.setup, err = parseTemplate("setup", strings.TrimSpace(raw)); err != nil {
			return nil, err
		}
		u, err := execute(cc.setup, Vars{RunID: "sample", Key: "racetest_sample_0", Token: "0000000000000000"})
		if err != nil {
			return nil, err
		}
		if _, err := parseTarget("setup", u); err != nil {
			return nil, err
		}
	}
	if cc.release == Auto && len(body) > maxSinglePacketBody {
		// Too big to hold in HTTP/2's windows: no need to ask the server.
		cc.release, cc.auto = LastByte, fmt.Sprintf("auto: the body (%d bytes) is over single-packet's %d", len(body), maxSinglePacketBody)
	}
	if cc.release == SinglePacket && len(body) > maxSinglePacketBody {
		return nil, inputErrorf("body", "single-packet holds each request's body in the connection's flow-control window: keep it under %d bytes (got %d), or use --release last-byte", maxSinglePacketBody, len(body))
	}
	return cc, nil
}

// maxSinglePacketBody keeps a burst's bodies inside HTTP/2's default
// 64 KiB windows, so nothing waits for the server's WINDOW_UPDATE.
const maxSinglePacketBody = 16 << 10

func validRelease(r Release) bool {
	for _, k := range Releases() {
		if r == k {
			return true
		}
	}
	return false
}

func releaseNames() string {
	var s []string
	for _, r := range Releases() {
		s = append(s, string(r))
	}
	return strings.Join(s, ", ")
}

func parseTemplate(field, text string) (*template.Template, error) {
	t, err := template.New(field).Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, inputErrorf(field, "bad template: %w (fields: {{.Burst}} {{.Attempt}} {{.Token}} {{.RunID}} {{.Key}})", err)
	}
	return t, nil
}

func parseTarget(field, raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, inputErrorf(field, "malformed URL %q: %w", raw, errUnwrapURL(err))
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, inputErrorf(field, "URL %q must start with http:// or https://", u.Redacted())
	}
	if u.Host == "" || u.Hostname() == "" {
		return nil, inputErrorf(field, "URL %q has no host", u.Redacted())
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, inputErrorf(field, "URL %q has a bad port %q", u.Redacted(), p)
		}
	}
	if u.User != nil {
		return nil, inputErrorf(field, "URL %q carries credentials; send them with -H 'Authorization: ...' instead", u.Redacted())
	}
	escapeQuery(u)
	return u, nil
}

func errUnwrapURL(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

func joinHostPort(host, port string) string {
	if strings.Contains(host, ":") {
		return "[" + host + "]:" + port
	}
	return host + ":" + port
}
