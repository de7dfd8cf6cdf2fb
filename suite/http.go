package suite

import (
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"text/template/parse"

	"github.com/racetest/racetest/report"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
)

// HTTPReleases are the ways an HTTP burst can be released.
var HTTPReleases = []string{"auto", "barrier", "last-byte", "single-packet", "naive"}

// templateFields are what an HTTP case's templates may use.
var templateFields = []string{"Burst", "Attempt", "Token", "RunID", "Key"}

var (
	methodPattern = regexp.MustCompile(`^[A-Za-z]+$`)
	headerName    = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
	statusPattern = regexp.MustCompile(`^[1-5]([0-9][0-9]|xx)$`)
)

func (c *checker) httpCase(path string, k *Case, sh shape, p *Plan) {
	h := *k.HTTP
	hp := path + ".http"
	h.Method = strings.ToUpper(strings.TrimSpace(h.Method))
	if h.Method != "" && !methodPattern.MatchString(h.Method) {
		c.fail(hp+".method", "method %q is not an HTTP method", h.Method)
	}
	c.httpURL(hp+".url", h.URL, "url")
	c.template(hp+".url", h.URL)
	for i, line := range h.Headers {
		name, value, ok := strings.Cut(line, ":")
		if !ok || !headerName.MatchString(strings.TrimSpace(name)) {
			c.fail(fmt.Sprintf("%s.headers[%d]", hp, i), "%q is not a header line (want \"Name: value\")", line)
			continue
		}
		c.template(fmt.Sprintf("%s.headers[%d]", hp, i), value)
	}
	for i, ck := range h.Cookies {
		if k, _, ok := strings.Cut(ck, "="); !ok || strings.TrimSpace(k) == "" || strings.ContainsAny(ck, ";\r\n") {
			c.fail(fmt.Sprintf("%s.cookies[%d]", hp, i), "%q is not a cookie (want name=value)", ck)
		}
	}
	switch {
	case h.Body != "" && h.BodyFile != "":
		c.fail(hp+".body_file", "body and body_file contradict each other: keep one")
	case h.BodyFile != "":
		if !filepath.IsAbs(h.BodyFile) && c.o.Dir != "" {
			h.BodyFile = filepath.Join(c.o.Dir, h.BodyFile)
		}
		if b, err := readSmall(h.BodyFile); err != nil {
			c.fail(hp+".body_file", "body_file: %v", err)
		} else {
			c.template(hp+".body_file", string(b))
		}
	}
	c.template(hp+".body", h.Body)
	if h.Release != "" && !slices.Contains(HTTPReleases, h.Release) {
		c.fail(hp+".release", "unknown release %q (want %s)", h.Release, strings.Join(HTTPReleases, ", "))
	}
	if h.Timeout != "" {
		if _, err := parseDuration(h.Timeout); err != nil {
			c.fail(hp+".timeout", "timeout: %v", err)
		}
	}
	if h.Warmup != "" {
		c.httpURL(hp+".warmup", h.Warmup, "warmup")
	}
	hasSuccess := h.Success != nil && (len(h.Success.Status) > 0 || h.Success.Body != "")
	if !hasSuccess && h.Effects == "" {
		c.fail(hp, "an http case needs a success rule (success: {status: [200]}) or an effects check "+
			"(effects: sql:postgres:SELECT count(*) …): without one racetest cannot tell what ran")
	}
	if h.Success != nil {
		for i, st := range h.Success.Status {
			if !statusPattern.MatchString(st) {
				c.fail(fmt.Sprintf("%s.success.status[%d]", hp, i), "status %q is not an HTTP status code (100–599) or class (2xx)", st)
			}
		}
		if h.Success.Body != "" {
			if _, err := regexp.Compile(h.Success.Body); err != nil {
				c.fail(hp+".success.body", "success body is not a regular expression: %v", err)
			}
		}
	}
	var params scenarios.Params
	auto := strings.HasPrefix(h.Effects, "auto:")
	every := c.autoShape(hp, auto, h.Effects == "auto:redis", h.Watch, h.SoloEvery, h.Allowed != nil)
	if h.Effects != "" && !auto {
		c.effects(hp+".effects", h.Effects, &params)
	}
	if auto {
		c.autoStore(hp+".effects", strings.TrimPrefix(h.Effects, "auto:"), &params)
	}
	for i, inv := range h.Invariant {
		c.check(fmt.Sprintf("%s.invariant[%d]", hp, i), "invariant", inv, &params)
	}
	allowed, _ := c.allowance(hp+".allowed", h.Allowed)
	if k.Expect == "catalog" {
		c.fail(path+".expect", "an http case has no catalog expectation: write expect: safe, race, or max_effects: N")
		return
	}
	expect, ok := c.expectation(path, k.Expectation, report.Expect{}, sh)
	if ok && expect.Kind == report.ExpectMax && !allowed.Successes && expect.Max < allowed.Max {
		c.fail(path+".max_effects", "max_effects %d is below allowed %d: the correct outcome would fail", expect.Max, allowed.Max)
	}
	if k.Connection != "" {
		c.fail(path+".connection", "an http case's only connection is its effects check's, taken from the suite's connections")
	}
	if k.ReadConnection != "" {
		c.fail(path+".read_connection", "an http case reads no replica: remove read_connection")
	}
	c.applicable(path, k.Shape, scenarios.Backend{Name: "http"})
	run := sh.run(c.o.Keep, scenarios.Connections{})
	// Conflicts to retry are a SQL server's, under the service here: a
	// default retry reaches no HTTP case (applicable refuses a case's own).
	run.Retries = 0
	cfg := runner.NewConfig(append(allowed.Options(), run.Options()...)...)
	cfg.SoloEvery = every
	if !ok || !c.prove(path, k, expect, &cfg, p) {
		return
	}
	rules, _ := c.serverRules(path, k.OnServer, sh)
	name := k.Name
	if name == "" {
		method := h.Method
		if method == "" {
			method = "GET"
		}
		name = method + " " + Redact(h.URL)
	}
	params.RunID, params.Attempts, params.Replicas, params.Seed = scenarios.NewRunID(), sh.Attempts, sh.Replicas, sh.Seed
	p.HTTP = &h
	p.Params = params
	p.Case = report.Case{Name: name, Scenario: "http", Backend: "http", Expect: expect, Strict: c.strict(k)}
	p.Config, p.Shape, p.OnServer = cfg, run, rules
	p.Conn = Conn{Value: Redact(h.URL), Source: "case"}
}

// effects checks an effects check and resolves the connection it needs
// into params, by the same rule as a scenario's backend.
func (c *checker) effects(path, spec string, params *scenarios.Params) {
	c.check(path, "effects", spec, params)
}

// check checks an effects check or an invariant (what names it).
func (c *checker) check(path, what, spec string, params *scenarios.Params) {
	kind, rest, _ := strings.Cut(spec, ":")
	backend := kind
	switch kind {
	case "sql":
		backend, rest, _ = strings.Cut(rest, ":")
		switch backend {
		case "mysql", "mariadb":
			backend = "mysql"
		case "postgres", "postgresql", "pg":
			backend = "postgres"
		default:
			c.fail(path, "%s sql:%s: the SQL backend is mysql or postgres (sql:postgres:SELECT count(*) …)", what, backend)
			return
		}
	case "redis":
	case "mongo":
		coll, filter, ok := strings.Cut(rest, ":")
		db, name, dot := strings.Cut(coll, ".")
		if !ok || !dot || db == "" || name == "" || strings.TrimSpace(filter) == "" {
			c.fail(path, "%s mongo: wants mongo:DATABASE.COLLECTION:FILTER, e.g. mongo:shop.payouts:{\"burst\": {{.Burst}}}", what)
			return
		}
	case "http":
		c.httpURL(path, rest, "the "+what+" check's URL")
		backend = ""
	default:
		c.fail(path, "%s %q: start it with sql:mysql:, sql:postgres:, redis:, mongo: or http:", what, spec)
		return
	}
	if strings.TrimSpace(rest) == "" {
		c.fail(path, "%s %s: says what to %s, but not what", what, kind, map[bool]string{true: "query", false: "run"}[kind == "sql"])
		return
	}
	c.template(path, rest)
	if backend == "" {
		return
	}
	if conn, ok := c.connection(path, "", backend, "the "+what+" check"); ok {
		conn.into(&params.Conn)
	}
}

// autoStore resolves the connection of effects: auto:STORE.
func (c *checker) autoStore(path, store string, params *scenarios.Params) {
	backend := map[string]string{"postgres": "postgres", "postgresql": "postgres", "pg": "postgres", "mysql": "mysql", "mariadb": "mysql",
		"redis": "redis", "mongo": "mongo", "mongodb": "mongo"}[store]
	if backend == "" {
		c.fail(path, "effects auto:%s: the store is auto:postgres, auto:mysql, auto:redis or auto:mongo", store)
		return
	}
	if conn, ok := c.connection(path, "", backend, "the effects check"); ok {
		conn.into(&params.Conn)
	}
}

func (c *checker) httpURL(path, raw, what string) {
	if raw == "" {
		c.fail(path, "%s is missing", what)
		return
	}
	u, err := url.Parse(raw)
	if err != nil {
		c.fail(path, "%s is not a URL: %v", what, err)
		return
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		c.fail(path, "%s %s must start with http:// or https://", what, Redact(raw))
		return
	}
	if u.Host == "" {
		c.fail(path, "%s %s names no host", what, Redact(raw))
	}
}

// template checks a templated value: its syntax, and that it uses only the
// fields each burst provides. It walks the template rather than run it: a
// {{range}} in a suite must not run while the suite is being read.
func (c *checker) template(path, text string) {
	if !strings.Contains(text, "{{") {
		return
	}
	t, err := template.New("").Parse(text)
	if err != nil {
		c.fail(path, "template: %v", err)
		return
	}
	for _, f := range fieldsOf(t.Root) {
		if !slices.Contains(templateFields, f) {
			c.fail(path, "template uses {{.%s}}: a template may use %s", f, fieldList())
		}
	}
}

func fieldList() string {
	var b []string
	for _, f := range templateFields {
		b = append(b, "{{."+f+"}}")
	}
	return strings.Join(b, ", ")
}

// fieldsOf lists the top-level fields (.Name) a template refers to.
func fieldsOf(n parse.Node) []string {
	var out []string
	var walk func(parse.Node)
	walk = func(n parse.Node) {
		switch n := n.(type) {
		case *parse.ListNode:
			if n != nil {
				for _, c := range n.Nodes {
					walk(c)
				}
			}
		case *parse.ActionNode:
			walk(n.Pipe)
		case *parse.PipeNode:
			if n != nil {
				for _, c := range n.Cmds {
					walk(c)
				}
			}
		case *parse.CommandNode:
			for _, a := range n.Args {
				walk(a)
			}
		case *parse.FieldNode:
			out = append(out, n.Ident[0])
		case *parse.ChainNode:
			walk(n.Node)
		case *parse.IfNode:
			walk(n.Pipe)
			walk(n.List)
			walk(n.ElseList)
		case *parse.RangeNode:
			walk(n.Pipe)
			walk(n.List)
			walk(n.ElseList)
		case *parse.WithNode:
			walk(n.Pipe)
			walk(n.List)
			walk(n.ElseList)
		case *parse.TemplateNode:
			walk(n.Pipe)
		}
	}
	walk(n)
	return out
}

// maxBodyFile bounds a request body read from a file: it is held in memory
// and sent N times per burst.
const maxBodyFile = 1 << 20

func readSmall(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", name, err)
	}
	defer f.Close()
	// A device or a pipe could block the check forever, or never end.
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, fmt.Errorf("cannot read %s: not a regular file", name)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxBodyFile+1))
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", name, err)
	}
	if len(b) > maxBodyFile {
		return nil, fmt.Errorf("%s is larger than %s bytes", name, strconv.Itoa(maxBodyFile))
	}
	return b, nil
}
