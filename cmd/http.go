package cmd

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/racetest/racetest/httpfire"
	"github.com/racetest/racetest/internal/printable"
	"github.com/racetest/racetest/report"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
	"github.com/spf13/cobra"
)

// httpOptions are the parsed flags of 'racetest http'.
type httpOptions struct {
	*factory
	// Command is the command line as given, for the Reproduce line.
	Command string
	// Config is the target as a suite file would state it.
	Config httpfire.Config
	Data   string // -d: the body, or @FILE
	// Shape holds attempts, bursts, the timeout (bounding connecting, each
	// request and each effects check), the connections of the effects
	// checks, --allowed and --solo-every.
	Shape shapeFlags
	finishFlags
}

// newCmdHTTP builds 'racetest http'. Tests pass runF to capture the options.
func newCmdHTTP(f *factory, runF func(context.Context, *httpOptions) error) *cobra.Command {
	opts := &httpOptions{factory: f}
	var success, declined string
	c := &cobra.Command{
		Use:   "http [METHOD] URL",
		Short: "Fire bursts of simultaneous requests at an HTTP endpoint and check what really happened",
		Long: `http fires N requests at one endpoint together, repeats the burst, and reports how many
the server said succeeded and — with --effects — how many actually took effect, counted
in the store after each burst. The URL, headers, body and effects check are Go templates:
{{.Burst}}, {{.Attempt}}, {{.Token}} (random, fresh each burst), {{.RunID}}, {{.Key}}.

Release modes (--release):
  auto           the default: single-packet when the server negotiates HTTP/2 (asked once,
                 before the first burst; the report says what was chosen), else last-byte
  barrier        one warmed keep-alive connection per request; all write when the gate opens
  last-byte      HTTP/1.1: each connection sends its request but the last byte before the
                 gate; then one loop sends every last byte
  single-packet  HTTP/2 (https with ALPN, or h2c for http://): all requests on one
                 connection, each held back by its final DATA frame; the held frames
                 leave in one write, in one TCP packet
  naive          a fresh connection per request after the gate (for reference)

Effects checks (--effects), run before and after each burst with the burst's template
values; the burst's effects are the change, so a shared count works. --invariant takes
the same forms and counts what must never happen; --allowed successes requires every
success to have landed exactly once (accounting):
  sql:mysql:QUERY | sql:postgres:QUERY    a query returning a count (--mysql-dsn, --postgres-url)
  redis:COMMAND                           a command returning a number or a list (--redis-url)
  mongo:DB.COLLECTION:FILTER              a count of the documents matching the JSON filter
  http:URL                                a GET whose body is a number (or {"count": n})`,
		Example: `  racetest http POST 'http://127.0.0.1:8080/redeem?code={{.Token}}' -n 20 --release last-byte
  racetest http POST https://localhost:8443/api/reward -k -H 'Authorization: Bearer t0k' \
      -d '{"user": "u{{.Burst}}"}' --release single-packet \
      --effects 'sql:postgres:SELECT count(*) FROM rewards WHERE user_id = '"'"'u{{.Burst}}'"'"''
  racetest http POST 'http://127.0.0.1:8080/attempt?key={{.Token}}' --success 200 \
      --effects 'http:http://127.0.0.1:8080/effects?key={{.Token}}' --expect race
  racetest http POST 'http://127.0.0.1:8080/redeem?code={{.Token}}' -n 2 --proxy 127.0.0.1:6433 \
      --effects 'sql:postgres:SELECT count(*) FROM redemptions WHERE code = '"'"'{{.Token}}'"'"''`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) < 1 || len(args) > 2 {
				return usageErrorf("http takes [METHOD] URL, got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			opts.Config.URL = args[len(args)-1]
			if len(args) == 2 {
				if c.Flags().Changed("method") && !strings.EqualFold(opts.Config.Method, args[0]) {
					return usageErrorf("two methods given: %s and -X %s", args[0], opts.Config.Method)
				}
				opts.Config.Method = args[0]
			}
			if success != "" {
				opts.Config.Success.Status = strings.Split(success, ",")
			}
			if declined != "" {
				opts.Config.Success.Declined = strings.Split(declined, ",")
			}
			opts.Command = commandLine(c, args, f.Registry)
			opts.Shape.given(c.Flags())
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runHTTP(c.Context(), opts)
		},
	}
	fs := c.Flags()
	cfg := &opts.Config
	fs.StringVarP(&cfg.Method, "method", "X", "", "HTTP method (default GET, or POST with a body)")
	fs.StringArrayVarP(&cfg.Headers, "header", "H", nil, "a request header, 'Name: value' (repeatable)")
	fs.StringArrayVar(&cfg.Cookies, "cookie", nil, "a cookie, name=value (repeatable; sent in one Cookie header)")
	fs.StringVarP(&opts.Data, "data", "d", "", "the request body, or @FILE to read it from a file")
	fs.StringVar(&success, "success", "", "status codes that mean the attempt executed, e.g. 200,201 or 2xx (default 2xx)")
	fs.StringVar(&cfg.Success.Body, "success-body", "", "a regular expression the body of a successful response matches")
	fs.StringVar(&cfg.Effects, "effects", "", "ground truth counted before and after each burst (its change is the burst's effects): sql:mysql:Q, sql:postgres:Q, redis:CMD, mongo:DB.COLL:FILTER or http:URL; or auto:postgres, auto:mysql, auto:redis, auto:mongo: each burst's change of that store beside the same requests sent one at a time")
	fs.StringSliceVar(&cfg.Watch, "watch", nil, "--effects auto:STORE: the tables (TABLE.COLUMN: only that column's sum; -TABLE.COLUMN: set it aside; Redis: key patterns, required; MongoDB: collections) to measure, comma-separated; default every one of the connection's schema")
	fs.StringArrayVar(&cfg.Invariants, "invariant", nil, "a rule that must always hold, in the forms of --effects: how many times it is broken, or a boolean (repeatable)")
	fs.StringVar(&declined, "declined", "", "the only status codes that mean \"already done\", e.g. 409 or 404,409 (default: any 4xx but those refusing the request itself: 401, 403, 404, 405, 429, …)")
	fs.StringArrayVar(&cfg.CredentialsTo, "credentials-to", nil, "another host (host or host:port) the setup request and an http: effects check may send the Authorization header and cookies to (repeatable; default: the target's own host only)")
	fs.StringVar((*string)(&cfg.Release), "release", string(httpfire.Auto), "how a burst leaves: auto (single-packet if the server speaks HTTP/2, else last-byte), barrier, last-byte, single-packet or naive")
	fs.BoolVarP(&cfg.Insecure, "insecure", "k", false, "skip TLS certificate verification (a local server with a self-signed certificate)")
	fs.StringVar(&cfg.Proxy, "proxy", "", "the control address 'racetest proxy' printed, when the service's database URL points at that proxy: each burst's first writes are held at the database until every request has reached one, so the race happens on every burst (docs/proxy.md)")
	fs.StringVar(&cfg.Warmup, "warmup", "", "a URL on the same host fetched once on each new HTTP/1.1 connection before it is used")
	fs.StringVar(&cfg.Setup, "setup", "", "a request made before each burst to create its subject: 'METHOD URL' or a URL (POST); must answer 2xx")
	opts.finishFlags.register(fs, "what the run must show: safe, race, lost, max=N or range=MIN-MAX effects per burst",
		"draw the example burst of a RACE as a timeline (table format)")
	_ = c.RegisterFlagCompletionFunc("format", fixed(report.Formats()))
	opts.Shape.register(fs, f.Registry, verbShape{fires: firesHTTP, timeout: httpfire.DefaultTimeout, usage: map[string]string{
		"attempts":   "requests released together in each burst",
		"bursts":     "bursts to fire, each with fresh template values",
		"timeout":    "bound on connecting, on each request and on each effects check; a request past it counts as unknown",
		"solo-every": "--effects auto:STORE: send a solo twin before every K-th burst (and the first); the others are compared with the latest twin",
	}})
	return c
}

func runHTTP(ctx context.Context, o *httpOptions) error {
	reporter, expect, err := o.finishFlags.parse()
	if err != nil {
		return err
	}
	// The run's own shape: the parsed flags stay as they were given.
	sh := o.Shape.Shape
	if err := checkAtLeastOne(intFlag{"attempts", sh.Attempts}, intFlag{"bursts", sh.Bursts}); err != nil {
		return err
	}
	allowed, err := runner.ParseAllowance(o.Shape.Allowed)
	if err != nil {
		return usageErrorf("--allowed: %v", err)
	}
	if httpfire.IsAuto(o.Config.Effects) && allowed != runner.DefaultAllowance {
		return usageErrorf("--allowed %s judges what --effects counts, and --effects auto:STORE counts nothing: each burst must change the store as its solo twin did (drop --allowed, or count the effects with a check)", o.Shape.Allowed)
	}
	if err := checkBurstMemory(sh.Attempts, o.Registry, httpBackend); err != nil {
		return err
	}
	if err := checkDurations(durationFlag{"timeout", sh.Timeout}); err != nil {
		return err
	}
	if err := o.Shape.checkRows(sh); err != nil {
		return err
	}
	cfg := o.Config
	cfg.Timeout = sh.Timeout
	if file, ok := strings.CutPrefix(o.Data, "@"); ok {
		cfg.BodyFile = file
	} else {
		cfg.Body = o.Data
	}
	p := scenarios.Params{RunID: scenarios.NewRunID(), Attempts: sh.Attempts, Replicas: 1, Conn: sh.Conn}
	if o.Shape.soloEvery < 1 {
		return usageErrorf("--solo-every must be at least 1 (got %d): 1 sends a solo twin before every burst", o.Shape.soloEvery)
	}
	if err := o.Shape.checkAutoFlags(httpfire.IsAuto(cfg.Effects), cfg.Watch, "tables, key patterns or collections",
		"name what the endpoint writes, e.g. --watch 'coupons_{{.RunID}},redemptions_{{.RunID}}' (Redis: --watch 'coupon:{{.RunID}}-*'), or leave --watch out to measure every table (collection) of the database"); err != nil {
		return err
	}
	if httpfire.IsAuto(cfg.Effects) {
		sh.SoloEvery = o.Shape.soloEvery
	}
	rc := runner.NewConfig(append(allowed.Options(), sh.Options()...)...)
	name := printable.Line(fmt.Sprintf("%s %s", methodOf(cfg), shortURL(cfg.URL)))
	shown := ""
	if allowed != runner.DefaultAllowance {
		shown = allowed.String()
	}
	pl, err := newHTTPPlan(cfg, sh, p, rc, name, shown, expect, o.Strict, o.proveSafe())
	if err != nil {
		if in := (*httpfire.InputError)(nil); errors.As(err, &in) {
			return usageError(httpFlagError(in))
		}
		return usageError(err)
	}
	pl.Case.Command = o.Command
	build := pl.Build
	pl.Build = func(ctx context.Context, p scenarios.Params) (runner.Target, error) {
		t, err := build(ctx, p)
		if ht, ok := t.(*httpfire.Target); ok {
			if why, err := ht.Choose(ctx); err == nil && why != "" && !o.IO.Quiet {
				// A server that cannot be reached fails the run, in its
				// words. Quiet, the choice is said only in the report's note.
				fmt.Fprintf(o.IO.ErrOut, "racetest: release: %s (%s)\n", ht.Release(), why)
			}
		}
		return t, err
	}
	cases := execute(ctx, o.factory, []plan{pl}, nil)
	var in *httpfire.InputError
	if errors.As(cases[0].Err, &in) {
		return usageError(httpFlagError(in))
	}
	return finish(ctx, o.IO, reporter, cases, reportOptions(o.IO, report.Options{
		Timeline: o.Timeline, Version: version(), Title: pageTitle(o.Format, "racetest http "+name),
	}))
}

// httpFlags names the flag that sets each httpfire.Config field, for an
// error in its value: a user of the command line wrote --data, not the
// suite's body_file.
var httpFlags = map[string]string{
	"body": "--data", "body_file": "--data", "cookie": "--cookie", "effects": "--effects",
	"header": "--header", "invariant": "--invariant", "method": "--method", "release": "--release", "setup": "--setup",
	"timeout": "--timeout", "url": "", "warmup": "--warmup", "watch": "--watch",
}

// httpFlagError is in, its field named as the flag that set it (the URL's
// error names the URL already).
func httpFlagError(in *httpfire.InputError) error {
	flag, ok := httpFlags[in.Field]
	switch {
	case !ok:
		return in
	case flag == "":
		return in.Err
	}
	return fmt.Errorf("%s: %w", flag, in.Err)
}

func methodOf(c httpfire.Config) string {
	if c.Method != "" {
		return strings.ToUpper(c.Method)
	}
	if c.Body != "" || c.BodyFile != "" {
		return "POST"
	}
	return "GET"
}

// shortURL keeps a table row readable: the URL without its query.
func shortURL(u string) string {
	if i := strings.IndexByte(u, '?'); i >= 0 {
		u = u[:i]
	}
	if len(u) > 48 {
		u = u[:47] + "…"
	}
	return u
}
