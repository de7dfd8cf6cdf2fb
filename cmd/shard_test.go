package cmd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/racetest/racetest/report"
	"github.com/racetest/racetest/scenarios"
)

// Three shards of a suite, merged, give the cases of one run of the whole,
// each once, with the same verdicts and the same exit code (issue 29). The
// cases' verdicts do not depend on chance: RACE on memory with 8 attempts
// (every burst races), and an expectation that fails (exit 1).
func TestSuiteShardsMergeAsOneRun(t *testing.T) {
	var src strings.Builder
	src.WriteString("defaults:\n  attempts: 8\n  bursts: 5\ncases:\n")
	for i := range 8 {
		fmt.Fprintf(&src, "  - {name: race %d, scenario: check-then-write, expect: race}\n", i)
	}
	src.WriteString("  - {name: wrongly expected safe, scenario: check-then-write, expect: safe}\n")
	file := writeSuite(t, src.String())
	dir := t.TempDir()

	whole := filepath.Join(dir, "whole.json")
	_, errOut, wholeCode := execSuite(t, memoryOnly(), nil, "suite", file, "--json", whole, "-q")
	if wholeCode != exitViolated {
		t.Fatalf("the whole suite exited %d, want %d: %s", wholeCode, exitViolated, errOut)
	}
	var parts []string
	shardCases := 0
	for k := 1; k <= 3; k++ {
		part := filepath.Join(dir, fmt.Sprintf("part-%d.json", k))
		parts = append(parts, part)
		_, errOut, code := execSuite(t, memoryOnly(), nil, "suite", file, "--shard", fmt.Sprintf("%d/3", k), "--json", part, "-q")
		if code != exitOK && code != exitViolated {
			t.Fatalf("shard %d/3 exited %d: %s", k, code, errOut)
		}
		var d report.Document
		if err := json.Unmarshal(readFile(t, part), &d); err != nil {
			t.Fatal(err)
		}
		if len(d.Runs) == 9 {
			t.Errorf("shard %d/3 ran every case", k)
		}
		if s := d.Shard; s == nil || s.K != k || s.N != 3 || s.Cases != len(d.Runs) || s.Digest == "" || s.Suite != file {
			t.Errorf("shard %d/3 records itself as %+v, want part %d of 3 of %s, its %d cases", k, s, k, file, len(d.Runs))
		}
		shardCases += len(d.Runs)
	}
	if shardCases != 9 {
		t.Errorf("the shards ran %d cases, want the suite's 9, each once", shardCases)
	}

	out, errOut, mergedCode := execSuite(t, memoryOnly(), nil, append([]string{"report", "merge", "-o", "json"}, parts...)...)
	if mergedCode != wholeCode {
		t.Errorf("merged exit %d, one run exited %d: %s", mergedCode, wholeCode, errOut)
	}
	var merged, one report.Document
	if err := json.Unmarshal([]byte(out), &merged); err != nil {
		t.Fatalf("merge -o json: %v\n%s", err, out)
	}
	if err := json.Unmarshal(readFile(t, whole), &one); err != nil {
		t.Fatal(err)
	}
	verdicts := func(d report.Document) map[string]string {
		m := map[string]string{}
		for _, r := range d.Runs {
			if _, twice := m[r.Name]; twice {
				t.Errorf("%s is in the report twice", r.Name)
			}
			m[r.Name] = fmt.Sprintf("%s met=%v", r.Verdict, r.ExpectationMet)
		}
		return m
	}
	got, want := verdicts(merged), verdicts(one)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("merged verdicts %v\none run's      %v", got, want)
	}

	// A part missing (its CI job died before writing it) is refused: the
	// merge would otherwise exit as if its cases had run.
	out, errOut, code := execSuite(t, memoryOnly(), nil, "report", "merge", parts[0], parts[1])
	if code != exitUsage || out != "" || !strings.Contains(errOut, "shard 3/3 of "+file+" is missing (2 of 3 parts given)") {
		t.Errorf("two parts of three: exit %d, out %q, err %q", code, out, errOut)
	}

	// The same shard twice is refused, before anything is written.
	out, errOut, code = execSuite(t, memoryOnly(), nil, "report", "merge", parts[0], parts[1], parts[0])
	if code != exitUsage || out != "" || !strings.Contains(errOut, "named twice") {
		t.Errorf("a shard named twice: exit %d, out %q, err %q", code, out, errOut)
	}
}

// --shard is checked before the suite is read.
func TestSuiteShardRefusesBadParts(t *testing.T) {
	file := writeSuite(t, "cases:\n  - {scenario: check-then-write, expect: race}\n")
	for _, bad := range []string{"0/3", "4/3", "3", "a/b"} {
		out, errOut, code := execSuite(t, memoryOnly(), nil, "suite", file, "--shard", bad)
		if code != exitUsage || out != "" || !strings.Contains(errOut, "--shard") {
			t.Errorf("--shard %s: exit %d, out %q, err %q", bad, code, out, errOut)
		}
	}
}

// endless is a stream that never ends, as /dev/zero piped in.
type endless struct{}

func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	return len(p), nil
}

// 'racetest report' reads a bounded report: a device or a stream past
// MaxReportSize is refused (exit 2) rather than read without end.
func TestReportReadsBoundedInput(t *testing.T) {
	io, out, errOut := testStreams()
	io.In = endless{}
	if code := execIO(t, io, memoryOnly(), "report", "-"); code != exitUsage || !strings.Contains(errOut.String(), "more than the 32 MiB") || out.Len() != 0 {
		t.Errorf("an endless stdin: exit %d, out %q, err %q", code, out, errOut)
	}
	io, out, errOut = testStreams()
	if code := execIO(t, io, memoryOnly(), "report", "/dev/zero"); code != exitUsage || !strings.Contains(errOut.String(), "not a regular file") {
		t.Errorf("/dev/zero: exit %d, out %q, err %q", code, out, errOut)
	}
}

// A saved report is data from elsewhere: its ESC and BEL bytes never reach
// a terminal as control sequences, in any field a person reads.
func TestReportEscapesControlCharacters(t *testing.T) {
	data := readFile(t, "../report/testdata/report.json")
	var doc report.Document
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	doc.Title = "title\x1b]0;owned\a"
	doc.Runs[0].Name = "name\x1b[2J"
	doc.Runs[0].Notes = append(doc.Runs[0].Notes, "note\a\x1b[31m")
	doc.Runs[0].Lesson = "lesson\x1b[1m"
	doc.Runs[0].Settings = map[string]string{"seed": "1\x1b[0m"}
	doc.Runs[0].Command = "racetest run x\x1b[K"
	file := filepath.Join(t.TempDir(), "r.json")
	b, _ := json.Marshal(doc)
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, format := range report.Formats() {
		io, out, errOut := testStreams()
		io.OutTTY, io.TermWidth, io.NoColor = true, 200, true // colour codes are ours to write
		execIO(t, io, memoryOnly(), "report", file, "-o", format)
		if i := bytes.IndexAny(out.Bytes(), "\x1b\a"); i >= 0 {
			t.Errorf("-o %s wrote a control character to the terminal: %q", format, out.Bytes()[max(0, i-40):min(out.Len(), i+20)])
		}
		if !strings.Contains(out.String(), "name") || errOut.Len() > 0 && strings.Contains(errOut.String(), "\x1b") {
			t.Errorf("-o %s: the report lost its case or stderr carries ESC:\n%s\n%q", format, out, errOut)
		}
	}
}

// The size limit is a bound, not a bar: a report of exactly MaxReportSize
// bytes is read, one byte more is refused, from a file and from a pipe.
func TestReportSizeLimitIsInclusive(t *testing.T) {
	data := readFile(t, "../report/testdata/report.json")
	exact := append(append([]byte{}, data...), bytes.Repeat([]byte{' '}, maxReportSize-len(data))...)
	over := append(append([]byte{}, exact...), ' ')
	dir := t.TempDir()
	for _, c := range []struct {
		name    string
		data    []byte
		refused bool
	}{{"exact", exact, false}, {"over", over, true}} {
		file := filepath.Join(dir, c.name+".json")
		if err := os.WriteFile(file, c.data, 0o600); err != nil {
			t.Fatal(err)
		}
		for _, src := range []string{file, "-"} {
			io, out, errOut := testStreams()
			io.In = bytes.NewReader(c.data)
			code := execIO(t, io, memoryOnly(), "report", src, "-o", "json")
			refused := code == exitUsage && strings.Contains(errOut.String(), "more than the 32 MiB")
			if refused != c.refused || !c.refused && out.Len() == 0 {
				t.Errorf("%s bytes of %d from %s: exit %d, refused %v, want %v; stderr %q", c.name, len(c.data), src, code, refused, c.refused, errOut)
			}
		}
	}
}

// --title replaces the title the report recorded; without it, the
// recorded one is kept.
func TestReportTitle(t *testing.T) {
	data := readFile(t, "../report/testdata/report.json")
	var doc report.Document
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	doc.Title = "recorded title"
	file := filepath.Join(t.TempDir(), "r.json")
	b, _ := json.Marshal(doc)
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args      []string
		want, not string
	}{
		{nil, "<title>recorded title</title>", "given title"},
		{[]string{"--title", "given title"}, "<title>given title</title>", "recorded title"},
	} {
		io, out, _ := testStreams()
		execIO(t, io, memoryOnly(), append([]string{"report", file, "-o", "html"}, c.args...)...)
		if !strings.Contains(out.String(), c.want) || strings.Contains(out.String(), c.not) {
			t.Errorf("report %v: want %q and no %q in the page", c.args, c.want, c.not)
		}
	}
}

// A saved report whose run was interrupted exits 1, saying so: that run was
// cut short, not this command (which would be 130).
func TestReportOfAnInterruptedRun(t *testing.T) {
	data := readFile(t, "../report/testdata/report.json")
	var doc report.Document
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	doc.Runs[0].Interrupted = true
	file := filepath.Join(t.TempDir(), "r.json")
	b, _ := json.Marshal(doc)
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	io, _, errOut := testStreams()
	if code := execIO(t, io, memoryOnly(), "report", file, "-o", "json"); code != exitViolated || !strings.Contains(errOut.String(), "a run in the report was interrupted before it finished") {
		t.Errorf("exit %d, stderr %q; want %d and the run named as interrupted", code, errOut, exitViolated)
	}
}

// report merge of one whole report is that report: one part is enough.
func TestReportMergeOfOnePart(t *testing.T) {
	io, out, errOut := testStreams()
	code := execIO(t, io, memoryOnly(), "report", "merge", "../report/testdata/report.json", "-o", "json")
	if code == exitUsage || out.Len() == 0 {
		t.Errorf("merge of one report: exit %d, stdout %d bytes, stderr %q", code, out.Len(), errOut)
	}
	if code := execIO(t, io, memoryOnly(), "report", "merge"); code != exitUsage {
		t.Errorf("merge of nothing: exit %d, want %d", code, exitUsage)
	}
}

// A story part with no text is left out of a report, not shown empty.
func TestStoryLeavesOutEmptyParts(t *testing.T) {
	var spec scenarios.Spec
	spec.Story.Naive, spec.Story.Fix = "naive code", "the fix"
	var titles []string
	for _, p := range storyOf(spec) {
		titles = append(titles, p.Title)
	}
	if got := strings.Join(titles, "|"); got != "The naive code|The fix" {
		t.Errorf("story parts %q, want the naive code and the fix alone", got)
	}
}

// Parts of two different suite files whose cases have the same names are
// not one set: the merge refuses them (exit 2), where it merged them with
// exit 0. The same file under another path is still one suite.
func TestReportMergeRefusesPartsOfDifferentSuites(t *testing.T) {
	dir := t.TempDir()
	racy := writeSuite(t, "defaults: {attempts: 8, bursts: 3}\ncases:\n  - {name: a, scenario: check-then-write, expect: race}\n  - {name: b, scenario: check-then-write, expect: race}\n")
	safe := writeSuite(t, "defaults: {attempts: 8, bursts: 3}\ncases:\n  - {name: a, scenario: unique-insert, expect: safe}\n  - {name: b, scenario: unique-insert, expect: safe}\n")
	copied := filepath.Join(t.TempDir(), "suite.yaml")
	if err := os.WriteFile(copied, readFile(t, racy), 0o600); err != nil {
		t.Fatal(err)
	}
	part := func(file string, k int) string {
		p := filepath.Join(dir, fmt.Sprintf("%d-%s-%d.json", k, filepath.Base(filepath.Dir(file)), k))
		if _, errOut, code := execSuite(t, memoryOnly(), nil, "suite", file, "--shard", fmt.Sprintf("%d/2", k), "--json", p, "-q"); code != exitOK {
			t.Fatalf("%s shard %d/2: exit %d: %s", file, k, code, errOut)
		}
		return p
	}
	out, errOut, code := execSuite(t, memoryOnly(), nil, "report", "merge", part(racy, 1), part(safe, 2))
	if code != exitUsage || out != "" || !strings.Contains(errOut, "not parts of one suite run") {
		t.Errorf("parts of two suites: exit %d, out %q, err %q", code, out, errOut)
	}
	if _, errOut, code := execSuite(t, memoryOnly(), nil, "report", "merge", part(racy, 1), part(copied, 2)); code != exitOK {
		t.Errorf("parts of one suite at two paths: exit %d: %s", code, errOut)
	}
}

// report merge bounds its parts and their bytes before reading any: more
// than MaxMergeParts parts, or parts past MaxReportSize together, exit 2
// at once.
func TestReportMergeBoundsItsParts(t *testing.T) {
	dir := t.TempDir()
	many := make([]string, maxMergeParts+1)
	for i := range many {
		many[i] = filepath.Join(dir, fmt.Sprintf("part-%d.json", i))
	}
	start := time.Now()
	out, errOut, code := execSuite(t, memoryOnly(), nil, append([]string{"report", "merge"}, many...)...)
	if code != exitUsage || out != "" || !strings.Contains(errOut, fmt.Sprintf("at most %d parts, got %d", maxMergeParts, len(many))) {
		t.Errorf("%d parts: exit %d, out %q, err %q", len(many), code, out, errOut)
	}
	var big []string
	for i := range 2 {
		f := filepath.Join(dir, fmt.Sprintf("big-%d.json", i))
		// Sparse: the size is what is checked, before anything is read.
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(f, maxReportSize/2+1); err != nil {
			t.Fatal(err)
		}
		big = append(big, f)
	}
	out, errOut, code = execSuite(t, memoryOnly(), nil, append([]string{"report", "merge"}, big...)...)
	if code != exitUsage || out != "" || !strings.Contains(errOut, "more than the 32 MiB a merged report may be") {
		t.Errorf("parts past %d bytes: exit %d, out %q, err %q", maxReportSize, code, out, errOut)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("refusing took %s", took)
	}
}

// The bounds are bounds, not bars: exactly MaxMergeParts parts, and parts
// of exactly MaxReportSize together, are taken; a path that is not a
// regular file (missing, a directory) adds nothing and is left to the
// reading to name.
func TestReportMergeBoundsAtTheirEdges(t *testing.T) {
	dir := t.TempDir()
	parts := make([]string, maxMergeParts)
	for i := range parts {
		parts[i] = filepath.Join(dir, fmt.Sprintf("missing-%d.json", i))
	}
	if err := checkMergeBounds(parts); err != nil {
		t.Errorf("exactly %d parts: %v", maxMergeParts, err)
	}
	sized := func(name string, n int64) string {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(f, n); err != nil {
			t.Fatal(err)
		}
		return f
	}
	a, b := sized("a.json", maxReportSize/2), sized("b.json", maxReportSize-maxReportSize/2)
	if err := checkMergeBounds([]string{a, dir, filepath.Join(dir, "nope.json"), b}); err != nil {
		t.Errorf("parts of exactly %d bytes, a directory and a missing file: %v", maxReportSize, err)
	}
	c := sized("c.json", 1)
	if err := checkMergeBounds([]string{a, b, c}); err == nil || !strings.Contains(err.Error(), "the parts up to "+c) {
		t.Errorf("one byte over: %v", err)
	}
}
