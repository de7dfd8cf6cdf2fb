package report

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// suiteCases is fixedCases with the outcomes only a gate sees: a safe
// expectation broken by a race, an inconclusive run (passing, then failing
// under strict), a run cut short, and a max_effects expectation exceeded.
func suiteCases() []Case {
	cs := fixedCases()
	race := cs[0].Result
	broken := cs[0]
	broken.Name, broken.Backend, broken.Expect = "coupon redemption", "postgres", Expect{Kind: "safe"}
	broken.Settings = map[string]string{"isolation": "read-committed", "variant": "for-update"}
	r := *race
	r.Server = "PostgreSQL 16.4"
	r.Notes = nil
	broken.Result = &r

	flat := *cs[1].Result
	flat.Bursts = slices.Clone(flat.Bursts)
	for i := range flat.Bursts {
		flat.Bursts[i].Overlap = 1
	}
	loose := Case{Name: "unique-insert", Scenario: "unique-insert", Backend: "redis", Lesson: "let a unique key decide",
		Expect: Expect{Kind: "safe"}, Result: &flat}
	strict := loose
	strict.Name, strict.Strict = "unique-insert (strict)", true

	cut := *cs[1].Result
	cut.Bursts = cut.Bursts[:1]
	cut.Planned, cut.Interrupted = 300, true
	interrupted := Case{Name: "ttl-lease", Scenario: "ttl-lease", Backend: "mysql", Expect: Expect{Kind: "safe"},
		Result: &cut, Err: context.Canceled}

	max := cs[0]
	max.Name, max.Expect = "memory-set (replicas=3)", Expect{Kind: "max", Max: 2}
	max.Scenario = "memory-set"
	max.Settings = map[string]string{"replicas": "3", "latency": "200µs", "seed": "7"}
	// Every attempt told "already paid", and nothing paid: too few.
	never := *cs[1].Result
	never.Bursts = slices.Clone(never.Bursts)
	for i := range never.Bursts {
		never.Bursts[i].Effects, never.Bursts[i].Outcomes = 0, [5]int{0, 3, 0, 0, 0}
	}
	never.Checks = nil
	lost := Case{Name: "reward-payout (swallow-errors)", Scenario: "reward-payout", Backend: "postgres", Lesson: "only the duplicate-key error means done",
		Expect: Expect{Kind: "safe"}, Settings: map[string]string{"variant": "swallow-errors"}, Result: &never}
	return append(cs, broken, loose, strict, interrupted, max, lost)
}

// junitOf renders cases and decodes them back.
func junitOf(t *testing.T, cases []Case) (junitSuites, []byte) {
	t.Helper()
	var b bytes.Buffer
	if err := JUnit(&b, cases, Options{Version: "test"}); err != nil {
		t.Fatal(err)
	}
	var doc junitSuites
	if err := xml.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatalf("the JUnit report is not XML: %v\n%s", err, b.Bytes())
	}
	return doc, b.Bytes()
}

func TestJUnitOutcomes(t *testing.T) {
	cs := suiteCases()
	doc, _ := junitOf(t, cs)
	if len(doc.Suites) != len(cs) || doc.Tests != len(cs) {
		t.Fatalf("%d suites, tests=%d for %d cases", len(doc.Suites), doc.Tests, len(cs))
	}
	type want struct{ failure, err, skipped string }
	wants := []want{
		{}, {}, {err: "ERROR"}, // fixedCases: race as expected, safe as expected, setup error
		{failure: "RACE"}, {skipped: "INCONCLUSIVE"}, {failure: "INCONCLUSIVE"}, {failure: "INTERRUPTED"}, {failure: "RACE"}, {failure: "LOST"},
	}
	failures, errs := 0, 0
	for i, s := range doc.Suites {
		tc := s.Cases[0]
		got := want{}
		if tc.Failure != nil {
			got.failure = tc.Failure.Type
			failures++
		}
		if tc.Error != nil {
			got.err = tc.Error.Type
			errs++
		}
		if tc.Skipped != nil {
			got.skipped = tc.Skipped.Type
		}
		if got != wants[i] {
			t.Errorf("case %d (%s): got %+v, want %+v", i, tc.Name, got, wants[i])
		}
		if tc.ClassName != cs[i].Backend || tc.Name != displayName(cs[i]) {
			t.Errorf("case %d: classname %q name %q, want the backend and the case name", i, tc.ClassName, tc.Name)
		}
	}
	if doc.Failures != failures || doc.Errors != errs {
		t.Errorf("totals failures=%d errors=%d, counted %d and %d", doc.Failures, doc.Errors, failures, errs)
	}
}

func TestJUnitFailureReadsLikeABugReport(t *testing.T) {
	doc, _ := junitOf(t, suiteCases())
	f := doc.Suites[3].Cases[0].Failure
	for _, want := range []string{
		"coupon redemption on postgres (PostgreSQL 16.4)", // what, where, which server
		"expected SAFE, but 3 of 4 bursts",                // the message states the broken promise
	} {
		if !strings.Contains(f.Message, want) {
			t.Errorf("failure message %q lacks %q", f.Message, want)
		}
	}
	for _, want := range []string{
		"3 simultaneous attempts × 4 bursts",
		"3 of 4 bursts left more than 1 effect",
		"worst was burst #0 with 3 effects",
		"Lesson: read, then write if free",
		"Reproduce: racetest run check-then-write --backend postgres -n 3 --bursts 4 --isolation read-committed --variant for-update --expect safe",
	} {
		if !strings.Contains(f.Body, want) {
			t.Errorf("failure body lacks %q:\n%s", want, f.Body)
		}
	}
	props := map[string]string{}
	for _, p := range doc.Suites[3].Properties {
		props[p.Name] = p.Value
	}
	for k, v := range map[string]string{
		"verdict": "RACE", "violations": "3", "bursts": "4", "violation_rate": "0.75", "server": "PostgreSQL 16.4",
		"effects_max": "3", "expectation_met": "false", "settings.variant": "for-update", "outcomes.executed": "8",
	} {
		if props[k] != v {
			t.Errorf("property %s = %q, want %q", k, props[k], v)
		}
	}
	if ub, err := strconv.ParseFloat(props["upper_bound_95"], 64); err != nil || ub <= 0.75 || ub >= 1 {
		t.Errorf("upper_bound_95 = %q", props["upper_bound_95"])
	}
}

// schemaFile is racetest's JUnit shape as an XML Schema.
var schemaFile = filepath.Join("testdata", "junit.xsd")

// TestJUnitMatchesSchemaXmllint validates the golden report and a report
// with hostile text against the XSD with xmllint, where it is installed
// (apt-get install libxml2-utils).
func TestJUnitMatchesSchemaXmllint(t *testing.T) {
	xmllint, err := exec.LookPath("xmllint")
	if err != nil {
		t.Skip("xmllint not installed (apt-get install libxml2-utils); TestJUnitMatchesSchema checks the same rules")
	}
	_, hostile := junitOf(t, hostileCases())
	for name, doc := range map[string][]byte{"golden": readGolden(t), "hostile": hostile} {
		file := filepath.Join(t.TempDir(), name+".xml")
		if err := os.WriteFile(file, doc, 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(xmllint, "--noout", "--schema", schemaFile, file).CombinedOutput()
		if err != nil {
			t.Errorf("%s report does not validate: %v\n%s", name, err, out)
		}
	}
	// The check must be able to fail: a testcase without its classname.
	bad := bytes.Replace(readGolden(t), []byte(`classname="memory" `), nil, 1)
	file := filepath.Join(t.TempDir(), "bad.xml")
	if err := os.WriteFile(file, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := exec.Command(xmllint, "--noout", "--schema", schemaFile, file).Run(); err == nil {
		t.Error("xmllint accepted a testcase without classname")
	}
}

// TestJUnitMatchesSchema checks the XSD's rules in Go, so the shape is
// pinned even where xmllint is absent: which element may hold which, which
// attributes each may have and must have, and that counts and times are
// numbers that add up.
func TestJUnitMatchesSchema(t *testing.T) {
	_, hostile := junitOf(t, hostileCases())
	for name, doc := range map[string][]byte{"golden": readGolden(t), "hostile": hostile} {
		if err := checkJUnitShape(doc); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	bad := bytes.Replace(readGolden(t), []byte(`classname="memory" `), nil, 1)
	if err := checkJUnitShape(bad); err == nil || !strings.Contains(err.Error(), "classname") {
		t.Errorf("a testcase without classname passed the check: %v", err)
	}
	extra := bytes.Replace(readGolden(t), []byte("<system-out>"), []byte("<properties></properties><system-out>"), 1)
	if err := checkJUnitShape(extra); err == nil {
		t.Error("properties inside a testcase passed the check")
	}
}

func readGolden(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "report.junit.xml"))
	if err != nil {
		t.Fatalf("%v (run go test ./report -update)", err)
	}
	return b
}

// hostileCases carry text that XML must escape: markup, quotes, control
// characters and invalid UTF-8 in names, errors and notes.
func hostileCases() []Case {
	cs := suiteCases()
	cs[2].Err = errors.New("mysql: <refused> & \"quoted\" \x00\x1b[31m \xff")
	cs[0].Name = `check-then-write <a href="x">&</a>`
	n := *cs[1].Result
	n.Notes = []string{"]]> <!-- -->\ttab\r\n"}
	cs[1].Result = &n
	return cs
}

// shapeRule is one element of the schema.
type shapeRule struct {
	children map[string]int // child element → most occurrences (0: unbounded)
	attrs    []string       // allowed
	required []string
	counts   []string // attributes that are non-negative integers
	times    []string // attributes that are non-negative decimals
	text     bool     // may hold text
	order    []string // children must appear in this order
}

var junitShape = map[string]shapeRule{
	"testsuites": {children: map[string]int{"testsuite": 0}, attrs: []string{"name", "tests", "failures", "errors", "time"},
		required: []string{"name", "tests", "failures", "errors", "time"}, counts: []string{"tests", "failures", "errors"}, times: []string{"time"}},
	"testsuite": {children: map[string]int{"properties": 1, "testcase": 0}, order: []string{"properties", "testcase"},
		attrs:    []string{"name", "tests", "failures", "errors", "skipped", "time"},
		required: []string{"name", "tests", "failures", "errors", "skipped", "time"},
		counts:   []string{"tests", "failures", "errors", "skipped"}, times: []string{"time"}},
	"properties": {children: map[string]int{"property": 0}},
	"property":   {attrs: []string{"name", "value"}, required: []string{"name", "value"}},
	"testcase": {children: map[string]int{"failure": 1, "error": 1, "skipped": 1, "system-out": 1},
		order: []string{"failure|error|skipped", "system-out"},
		attrs: []string{"name", "classname", "time"}, required: []string{"name", "classname", "time"}, times: []string{"time"}},
	"failure":    {attrs: []string{"message", "type"}, text: true},
	"error":      {attrs: []string{"message", "type"}, text: true},
	"skipped":    {attrs: []string{"message", "type"}, text: true},
	"system-out": {text: true},
}

// checkJUnitShape validates doc against junitShape, the XSD's rules.
func checkJUnitShape(doc []byte) error {
	dec := xml.NewDecoder(bytes.NewReader(doc))
	type frame struct {
		name   string
		seen   map[string]int
		lastAt int
	}
	var stack []*frame
	roots := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("not well-formed XML: %w", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			name := tok.Name.Local
			rule, ok := junitShape[name]
			if !ok {
				return fmt.Errorf("element <%s> is not in the schema", name)
			}
			if len(stack) == 0 {
				roots++
				if name != "testsuites" || roots > 1 {
					return fmt.Errorf("the root must be one <testsuites>, got <%s>", name)
				}
			} else {
				parent := stack[len(stack)-1]
				prule := junitShape[parent.name]
				most, allowed := prule.children[name]
				if !allowed {
					return fmt.Errorf("<%s> may not hold <%s>", parent.name, name)
				}
				parent.seen[name]++
				if most > 0 && parent.seen[name] > most {
					return fmt.Errorf("<%s> holds more than %d <%s>", parent.name, most, name)
				}
				if prule.order != nil {
					at := slices.IndexFunc(prule.order, func(g string) bool { return slices.Contains(strings.Split(g, "|"), name) })
					if at < parent.lastAt {
						return fmt.Errorf("<%s> comes too late in <%s>", name, parent.name)
					}
					parent.lastAt = at
					if strings.Contains(prule.order[at], "|") && exclusiveCount(parent.seen, prule.order[at]) > 1 {
						return fmt.Errorf("<%s> holds more than one of %s", parent.name, prule.order[at])
					}
				}
			}
			have := map[string]string{}
			for _, a := range tok.Attr {
				if !slices.Contains(rule.attrs, a.Name.Local) {
					return fmt.Errorf("<%s> has attribute %s, not in the schema", name, a.Name.Local)
				}
				have[a.Name.Local] = a.Value
			}
			for _, r := range rule.required {
				if _, ok := have[r]; !ok {
					return fmt.Errorf("<%s> lacks required attribute %s", name, r)
				}
			}
			for _, c := range rule.counts {
				if n, err := strconv.Atoi(have[c]); err != nil || n < 0 {
					return fmt.Errorf("<%s %s=%q> is not a count", name, c, have[c])
				}
			}
			for _, tm := range rule.times {
				if x, err := strconv.ParseFloat(have[tm], 64); err != nil || x < 0 {
					return fmt.Errorf("<%s %s=%q> is not a time in seconds", name, tm, have[tm])
				}
			}
			stack = append(stack, &frame{name: name, seen: map[string]int{}})
		case xml.EndElement:
			top := stack[len(stack)-1]
			if top.name == "testsuite" && top.seen["testcase"] == 0 {
				return errors.New("a <testsuite> holds no <testcase>")
			}
			stack = stack[:len(stack)-1]
		case xml.CharData:
			if len(stack) > 0 && !junitShape[stack[len(stack)-1].name].text && len(bytes.TrimSpace(tok)) > 0 {
				return fmt.Errorf("<%s> may not hold text", stack[len(stack)-1].name)
			}
		}
	}
	if roots != 1 {
		return errors.New("no <testsuites> root")
	}
	return nil
}

func exclusiveCount(seen map[string]int, group string) int {
	n := 0
	for _, g := range strings.Split(group, "|") {
		n += seen[g]
	}
	return n
}

func TestJUnitTotalsAddUp(t *testing.T) {
	cs := suiteCases()
	for i := range cs {
		if cs[i].Result != nil {
			r := *cs[i].Result
			r.Elapsed = time.Duration(i+1) * 250 * time.Millisecond
			cs[i].Result = &r
		}
	}
	doc, _ := junitOf(t, cs)
	sum := 0.0
	for _, s := range doc.Suites {
		x, _ := strconv.ParseFloat(s.Time, 64)
		sum += x
	}
	total, _ := strconv.ParseFloat(doc.Time, 64)
	if diff := total - sum; diff > 0.01 || diff < -0.01 {
		t.Errorf("total time %s, suites add up to %.3f", doc.Time, sum)
	}
}

func TestMarkdown(t *testing.T) {
	var b bytes.Buffer
	if err := Markdown(&b, suiteCases(), Options{Title: "gate | with a pipe"}); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	tables := 0
	for _, l := range strings.Split(md, "\n") {
		if strings.HasPrefix(l, "|---") {
			tables++
		}
	}
	if tables != 1 {
		t.Errorf("want one table, found %d", tables)
	}
	for _, want := range []string{
		"## gate \\| with a pipe",
		"| ❌ | coupon redemption | postgres | PostgreSQL 16.4 | 3 × 4 | 3/4 | 3 effects | RACE 75% | safe |",
		"### ❌ coupon redemption on postgres",
		"> **Lesson:** read, then write if free",
		"### ⚠️ unique-insert on redis", // inconclusive but passing: still explained
		"| ⛔ | unique-insert | mysql |", // setup error
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "### ✅") {
		t.Error("a case that met its expectation got a section")
	}
	var ok bytes.Buffer
	if err := Markdown(&ok, fixedCases()[:2], Options{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ok.String(), "**2 of 2 cases met their expectation.**") {
		t.Errorf("passing summary:\n%s", ok.String())
	}
}

func TestHeadline(t *testing.T) {
	cs := suiteCases()
	for i, want := range map[int]string{
		0: "check-then-write on memory (Example DB 1.0): RACE 75% (3 of 4 bursts over 1 effect), expected race",
		2: "unique-insert on mysql could not run: mysql: cannot connect to 127.0.0.1:3306 (connection refused)",
		3: "coupon redemption on postgres (PostgreSQL 16.4): expected SAFE, but 3 of 4 bursts left more than 1 effect (worst 3)",
		4: "unique-insert on redis: INCONCLUSIVE, only 0 of 3 bursts had two attempts in flight at once (need 50%)",
	} {
		if got := Headline(cs[i]); got != want {
			t.Errorf("case %d:\n got %s\nwant %s", i, got, want)
		}
	}
}

// The reproduce line names the release a run used unless it is what the
// default (auto) picks there: the gate on memory, and only there.
func TestReproduceNamesTheRelease(t *testing.T) {
	for _, c := range []struct {
		backend, release, want string
		named                  bool
	}{
		{"memory", "gate", "--release", false},
		{"redis", "gate", "--release gate", true},
		{"mysql", "last-byte", "--release last-byte", true},
	} {
		got := reproduce(Case{Scenario: "check-then-write", Backend: c.backend, Release: c.release})
		if strings.Contains(got, c.want) != c.named {
			t.Errorf("%s with %s: reproduce %q, want --release named: %v", c.backend, c.release, got, c.named)
		}
	}
}
