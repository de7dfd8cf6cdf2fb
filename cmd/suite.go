package cmd

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/racetest/racetest/httpfire"
	"github.com/racetest/racetest/internal/printable"
	"github.com/racetest/racetest/report"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/suite"
	"github.com/spf13/cobra"
)

// suiteOptions are the parsed flags of 'racetest suite' and its dependencies.
type suiteOptions struct {
	*factory
	File   string
	Strict bool
	// AllowInconclusive lets a case that proved nothing pass.
	AllowInconclusive bool
	List              bool
	// Files are the reports to write, by format name: --junit FILE,
	// --markdown FILE, one flag for each format a file can hold.
	Files map[string]string
	// Format is what stdout gets: the table, or another report.
	Format   string
	Timeline bool
	Keep     bool
	Conn     scenarios.Connections
	// Shard is --shard K/N: run part K of N of the suite ("" the whole).
	Shard string
	// Cases are --case NAME: run only the cases of these names.
	Cases []string
}

// newCmdSuite builds 'racetest suite'. Tests pass runF to capture the options.
func newCmdSuite(f *factory, runF func(context.Context, *suiteOptions) error) *cobra.Command {
	opts := &suiteOptions{factory: f}
	c := &cobra.Command{
		Use:   "suite FILE",
		Short: "Run a YAML suite of cases, each with its expectation: a CI gate with JUnit, Markdown and JSON reports",
		Long: `racetest suite runs every case of a YAML suite file (built-in scenarios on backends, with
their options, each with an expectation: safe, race, max_effects: N, or prove: 1%) and exits
non-zero when any expectation is not met. The whole file is checked before anything runs.

A server backend runs only where its connection is configured: the case's own connection, then
the flag (--mysql-dsn, …), then defaults.connections in the file, then the environment
(RACETEST_MYSQL_DSN, …). The word "default" accepts the standard local address. The clustered
scenarios (replica-read, failover-lock) also need a replica, found in the same order: the case's
read_connection, --postgres-read-url (…), defaults.connections.postgres_read (…), the environment.`,
		Example: `  racetest suite testdata/suites/memory.yaml
  racetest suite --list testdata/suites/catalog.yaml
  racetest suite --strict --junit racetest.xml --markdown "$GITHUB_STEP_SUMMARY" ci/racetest.yaml`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErrorf("suite takes one suite file (or - for standard input), got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			opts.File = args[0]
			opts.Files = map[string]string{}
			for _, format := range fileFormats() {
				if file, _ := c.Flags().GetString(format.Name); file != "" {
					opts.Files[format.Name] = file
				}
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runSuite(c.Context(), opts)
		},
	}
	fs := c.Flags()
	fs.BoolVar(&opts.Strict, "strict", false, "fail (exit 4) every INCONCLUSIVE case, even one with allow_inconclusive: true (without it a suite already fails those without)")
	fs.BoolVar(&opts.AllowInconclusive, "allow-inconclusive", false, "let cases that proved nothing (INCONCLUSIVE) pass; by default a gate fails them (exit 4)")
	fs.BoolVar(&opts.List, "list", false, "show what would run, and with which connections, without running anything")
	for _, format := range fileFormats() {
		fs.String(format.Name, "", "write "+format.File+" to `FILE`")
	}
	fs.StringVarP(&opts.Format, "format", "o", "table", "what standard output gets: "+strings.Join(report.Formats(), ", "))
	fs.BoolVar(&opts.Timeline, "timeline", false, "draw the example burst of each RACE as a timeline under the table")
	fs.BoolVar(&opts.Keep, "keep", false, "keep every run's namespaced tables, keys and collections for inspection")
	fs.StringArrayVar(&opts.Cases, "case", nil, "run only the case of this `NAME` (repeatable): a report's Reproduce line for a suite's own code")
	fs.StringVar(&opts.Shard, "shard", "", "run part `K/N` of the suite (one per CI job; each case is in one part, by its name): merge the parts' --json reports with 'racetest report merge'")
	for _, b := range connBackends(f.Registry) {
		// No default from the environment here: a suite reads it last,
		// after the file's own defaults.connections.
		connVar(fs, &opts.Conn, b.Conn, "", fmt.Sprintf("%s for every %s case (overrides the suite file)", b.Conn.What, b.Name))
		if r := b.ReadConn; r != nil {
			connVar(fs, &opts.Conn, r, "", fmt.Sprintf("%s, for every clustered %s case (overrides the suite file's %s)", r.What, b.Name, r.Key))
		}
	}
	completeEnums(c, f.Registry)
	return c
}

func runSuite(ctx context.Context, o *suiteOptions) error {
	reporter, err := report.Lookup(o.Format)
	if err != nil {
		return usageError(err)
	}
	shard, err := suite.ParseShard(cmp.Or(o.Shard, "1/1"))
	if err != nil {
		return usageError(err)
	}
	plans, source, err := loadSuite(ctx, o)
	if err != nil {
		return err
	}
	if plans, err = selectCases(o.File, plans, o.Cases); err != nil {
		return err
	}
	var part *report.ShardJSON
	if shard.N > 1 {
		all := len(plans)
		part = &report.ShardJSON{Suite: printable.Line(o.File), Digest: suiteDigest(source, plans), K: shard.K, N: shard.N}
		plans = shard.Select(plans)
		part.Cases = len(plans)
		fmt.Fprintf(o.IO.ErrOut, "racetest suite: shard %s: %d of the %d cases\n", shard, len(plans), all)
		if len(plans) == 0 {
			// Its reports are still written, empty, so that a CI matrix
			// merges every part alike.
			fmt.Fprintf(o.IO.ErrOut, "racetest suite: shard %s of %s holds no case: nothing to run\n", shard, printable.Line(o.File))
		}
	}
	ps, err := suiteRuns(o, plans)
	if err != nil {
		return suiteError(o.IO, err)
	}
	if o.List {
		return listSuite(o.IO.Out, o.File, plans)
	}
	var outs []output
	for _, format := range fileFormats() {
		outs = append(outs, output{"--" + format.Name, o.Files[format.Name]})
	}
	if err := checkOutputs(suiteInputs(o.File, plans), outs); err != nil {
		return err
	}
	for _, p := range plans {
		if err := checkBurstMemory(p.Config.Attempts, o.Registry, p.Case.Backend); err != nil {
			return usageError(fmt.Errorf("%s:%d:%d: case %q: %w", o.File, p.Line, p.Column, p.Case.Name, err))
		}
	}
	// A CI log (stderr not a terminal, so no bars) gets a line per case,
	// unless -q asked for the verdict lines alone (on stdout).
	log := caseLog{w: o.IO.ErrOut, on: !o.IO.ErrTTY && !o.IO.Quiet, color: o.IO.ErrColor(), total: len(plans)}
	if log.on {
		fmt.Fprintf(o.IO.ErrOut, "racetest suite %s: %d cases\n", printable.Line(o.File), len(plans))
	}
	var done []report.Case
	cases := execute(ctx, o.factory, ps, func(c report.Case) {
		p := plans[len(done)]
		c = scriptCaseError(c)
		c = p.Resolve(c)
		done = append(done, c)
		log.line(c)
	})
	cases = done[:len(cases)]

	title := fmt.Sprintf("racetest suite %s — %d of %d cases", printable.Line(o.File), len(cases), len(plans))
	if shard.N > 1 {
		title = fmt.Sprintf("racetest suite %s, shard %s — %d of %d cases", printable.Line(o.File), shard, len(cases), len(plans))
	}
	ropts := reportOptions(o.IO, report.Options{Timeline: o.Timeline, Version: version(), Title: title, Brief: true, Shard: part})
	if err := reporter(o.IO.Out, printableNames(cases), ropts); err != nil {
		return outputError(o.Format+" report", err)
	}
	ropts.Color = false
	var writeErrs []string
	for _, format := range fileFormats() {
		file := o.Files[format.Name]
		if file == "" {
			continue
		}
		if err := writeReport(file, format.Run, cases, ropts); err != nil {
			writeErrs = append(writeErrs, err.Error())
		}
	}
	verdict := verdictError(ctx, cases)
	if len(writeErrs) > 0 {
		werr := fmt.Errorf("writing the reports: %s", strings.Join(writeErrs, "; "))
		if verdict != nil {
			fmt.Fprintln(o.IO.ErrOut, "racetest: "+werr.Error())
			return verdict
		}
		// A gate whose report is missing must not look green.
		return setupError(werr)
	}
	return verdict
}

// fileFormats are the formats a suite writes to files, each with its flag.
func fileFormats() []report.Format {
	var out []report.Format
	for _, f := range report.AllFormats() {
		if f.File != "" {
			out = append(out, f)
		}
	}
	return out
}

// selectCases keeps the plans named by --case, in the file's order; a
// name no case has is bad input, with the nearest names.
func selectCases(file string, plans []suite.Plan, names []string) ([]suite.Plan, error) {
	if len(names) == 0 {
		return plans, nil
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var kept, all []string
	var mine []suite.Plan
	for _, p := range plans {
		all = append(all, p.Case.Name)
		if want[p.Case.Name] {
			mine = append(mine, p)
			kept = append(kept, p.Case.Name)
		}
	}
	for _, n := range names {
		if !slices.Contains(kept, n) {
			hint := ""
			if s := scenarios.Suggest(n, all); s != "" {
				hint = " (" + s + ")"
			}
			return nil, usageErrorf("--case %s: %s has no case of that name%s; 'racetest suite --list %s' shows them",
				printable.Shell(n), printable.Line(file), hint, printable.Shell(file))
		}
	}
	return mine, nil
}

// caseCommand is the command that runs one case of a suite file again,
// for the Reproduce line of a case whose command no other verb can say
// (an HTTP or script case). A suite read from standard input has none.
func caseCommand(file, name string) string {
	if file == "-" {
		return ""
	}
	return printable.ShellLine("racetest", "suite", file, "--case", name)
}

// loadSuite reads, parses and checks the suite: every problem is a usage
// error printed at its place in the file, and nothing runs. Ctrl-C stops
// it at any moment, even inside the YAML library or a read of a standard
// input that never ends.
func loadSuite(ctx context.Context, o *suiteOptions) ([]suite.Plan, []byte, error) {
	type loaded struct {
		plans  []suite.Plan
		source []byte
		err    error
	}
	done := make(chan loaded, 1)
	go func() {
		plans, source, err := readSuite(o)
		done <- loaded{plans, source, err}
	}()
	select {
	case <-ctx.Done():
		return nil, nil, context.Canceled
	case l := <-done:
		var es suite.Errors
		if errors.As(l.err, &es) {
			return nil, nil, suiteError(o.IO, l.err)
		}
		return l.plans, l.source, l.err
	}
}

// readSuite does loadSuite's work, and returns the suite's text too; it
// prints nothing, since loadSuite may have returned already.
func readSuite(o *suiteOptions) ([]suite.Plan, []byte, error) {
	var (
		data []byte
		err  error
		dir  string
	)
	name := o.File
	if o.File == "-" {
		name = "<stdin>"
		data, err = suite.Read(name, o.IO.In)
		dir = "."
	} else {
		data, err = suite.ReadFile(o.File)
		dir = filepath.Dir(o.File)
	}
	if err != nil {
		return nil, nil, usageErrorf("cannot read the suite: %w", err)
	}
	s, err := suite.Parse(name, data, os.LookupEnv, o.Registry)
	if err != nil {
		return nil, nil, err
	}
	plans, err := s.Plans(o.Registry, suite.Options{
		Conn: o.Conn, Env: os.LookupEnv, Strict: o.Strict, AllowInconclusive: o.AllowInconclusive, Keep: o.Keep, Dir: dir,
	})
	return plans, data, err
}

// suiteInputs names the files a suite run reads: the suite itself and the
// HTTP bodies it names, in file order.
func suiteInputs(file string, plans []suite.Plan) []input {
	var in []input
	if file != "-" {
		in = append(in, input{"the suite file", file})
	}
	for _, p := range plans {
		if p.HTTP != nil && p.HTTP.BodyFile != "" {
			in = append(in, input{fmt.Sprintf("the body_file of case %q", p.Case.Name), p.HTTP.BodyFile})
		}
	}
	return in
}

// suiteError prints a suite's problems as they are (file:line:col first,
// which editors and CI logs link), and exits 2 without a usage hint.
func suiteError(io *ioStreams, err error) error {
	fmt.Fprintln(io.ErrOut, printable.Text(err.Error()))
	return &exitError{code: exitUsage, err: err, quiet: true}
}

// httpConfig maps an HTTP case onto the HTTP engine's configuration, field
// for field; the timeout, unless the case gives its own, is the case's
// per-attempt timeout.
func httpConfig(p suite.Plan) httpfire.Config {
	h := p.HTTP
	cfg := httpfire.Config{
		Method: h.Method, URL: h.URL, Headers: h.Headers, Cookies: h.Cookies,
		Body: h.Body, BodyFile: h.BodyFile, Effects: h.Effects, Invariants: h.Invariant, Release: httpfire.Release(h.Release),
		Insecure: h.Insecure, Warmup: h.Warmup, Setup: h.Setup, CredentialsTo: h.CredentialsTo, Proxy: h.Proxy, Timeout: p.Config.Timeout,
		Watch: h.Watch,
	}
	if h.Success != nil {
		cfg.Success = httpfire.Success{Status: h.Success.Status, Body: h.Success.Body, Declined: h.Success.Declined}
	}
	if h.Timeout != "" {
		if d, err := time.ParseDuration(h.Timeout); err == nil {
			cfg.Timeout = d
		}
	}
	return cfg
}

// suiteRuns makes the runs of a suite's plans: a scenario's plan is its
// run; an HTTP case's and a script case's runs build their own targets.
// The HTTP engine checks every case's configuration here, before anything
// runs: a problem is a usage error at the case's place in the file.
func suiteRuns(o *suiteOptions, plans []suite.Plan) ([]plan, error) {
	ps := make([]plan, len(plans))
	var problems []string
	for i, p := range plans {
		ps[i] = p.Run
		if p.HTTP != nil {
			allowed := ""
			if a := allowanceOf(p.Config); a != runner.DefaultAllowance {
				allowed = a.String()
			}
			var err error
			ps[i], err = newHTTPPlan(httpConfig(p), p.Shape, p.Params, p.Config, p.Case.Name, allowed, p.Case.Expect, p.Case.Strict, p.Case.ProveSafe)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s:%d:%d: case %q: %v", o.File, p.Line, p.Column, p.Case.Name, err))
				continue
			}
		}
		if p.Script != nil {
			ps[i].Build = scriptBuilder(o.IO.ErrOut, "running scripts", p.Case.Backend, p.Script.Scripts)
		}
		if p.Script != nil || p.HTTP != nil {
			ps[i].Case.Command = caseCommand(o.File, p.Case.Name)
		}
		if p.Prove > 0 {
			ps[i].Case.Settings["prove"] = formatBound(p.Prove)
			ps[i].Case.Prove = p.Prove
		}
	}
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "\n"))
	}
	return ps, nil
}

// listSuite shows what would run, with which connection, and nothing runs.
func listSuite(w io.Writer, file string, plans []suite.Plan) error {
	fmt.Fprintf(w, "%s: %d cases (listed, not run)\n\n", file, len(plans))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tCASE\tBACKEND\tN×BURSTS\tEXPECT\tCONNECTION")
	for i, p := range plans {
		bursts := strconv.Itoa(p.Config.Bursts)
		if p.Config.StopOnViolation {
			bursts = "≤" + bursts
		}
		shape := fmt.Sprintf("%d×%s", p.Config.Attempts, bursts)
		if p.Config.Replicas > 1 {
			shape += fmt.Sprintf(" R=%d", p.Config.Replicas)
		}
		if p.Config.Waves > 1 {
			shape += fmt.Sprintf(" waves=%d", p.Config.Waves)
			if p.Config.Deploy {
				shape += "+deploy"
			}
		}
		expect := p.Case.Expect.String()
		if p.Prove > 0 {
			expect += ", prove ≤" + formatBound(p.Prove)
		}
		for _, r := range p.OnServer {
			expect += fmt.Sprintf("; %s on %s", r.Expect, r.Match)
		}
		conn := "-"
		if p.Conn.Value != "" {
			conn = p.Conn.Value + " (" + p.Conn.Source + ")"
		}
		if p.ReadConn.Value != "" {
			conn += "; replica " + p.ReadConn.Value + " (" + p.ReadConn.Source + ")"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", i+1, p.Case.Name, p.Case.Backend, shape, expect, conn)
	}
	return tw.Flush()
}

func formatBound(x float64) string {
	return strconv.FormatFloat(x*100, 'f', -1, 64) + "%"
}

// checkWritable fails early, before a long run, when a report could not be
// written: its directory must exist.
func checkWritable(file string) error {
	if file == "" {
		return nil
	}
	dir := filepath.Dir(file)
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("its directory %s does not exist", dir)
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if st, err := os.Stat(file); err == nil && st.IsDir() {
		return fmt.Errorf("that is a directory: name a file in it, e.g. %s", filepath.Join(file, "racetest.out"))
	}
	return nil
}

// caseLog prints one line per case as it finishes, for a CI log (stderr
// that is not a terminal, where no progress bars are drawn).
type caseLog struct {
	w     io.Writer
	on    bool
	color bool
	n     int
	total int
}

func (l *caseLog) line(c report.Case) {
	l.n++
	if !l.on {
		return
	}
	a := report.Assess(c)
	status, code := "ok", "\x1b[32m"
	switch {
	case a.Verdict == report.Errored && !a.Interrupted:
		status, code = "ERROR", "\x1b[31m"
	case !a.Met:
		status, code = "FAIL", "\x1b[31m"
	case a.Verdict == report.Inconclusive:
		status, code = "WARN", "\x1b[33m"
	}
	status = fmt.Sprintf("%-5s", status)
	if l.color {
		status = code + status + "\x1b[0m"
	}
	elapsed := ""
	if r := c.Result; r != nil {
		if r.Elapsed < time.Second {
			elapsed = fmt.Sprintf(" (%dms)", r.Elapsed.Milliseconds())
		} else {
			elapsed = fmt.Sprintf(" (%.1fs)", r.Elapsed.Seconds())
		}
	}
	width := len(strconv.Itoa(l.total))
	fmt.Fprintf(l.w, "[%*d/%d] %s %s%s\n", width, l.n, l.total, status, printable.Line(report.Headline(c)), elapsed)
}

// printableNames returns cases whose names a terminal shows as written:
// a case name is the suite author's text, and a control character or a
// bidi override in it could rewrite or hide a line of the table. The
// files (JSON, JUnit, Markdown) keep the names as they are.
func printableNames(cases []report.Case) []report.Case {
	out := make([]report.Case, len(cases))
	for i, c := range cases {
		c.Name = printable.Line(c.Name)
		out[i] = c
	}
	return out
}

// suiteDigest identifies the cases a suite is split into: the suite's text
// (two suites whose cases have the same names are not one set), then each
// case's name and backend, in order. The parts of one run share it ('report
// merge' checks that they do); the same file under another path (another
// CI machine's checkout) does too.
func suiteDigest(source []byte, plans []suite.Plan) string {
	h := sha256.New()
	fmt.Fprintf(h, "%x\n", sha256.Sum256(source))
	for _, p := range plans {
		fmt.Fprintf(h, "%q %q\n", p.Case.Name, p.Case.Backend)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}
