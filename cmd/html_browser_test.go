package cmd

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/racetest/racetest/internal/testenv"
	"github.com/racetest/racetest/report"
)

// chromium finds a headless-capable browser, or skips (fails under
// RACETEST_REQUIRE_SERVERS=1, as CI sets it: .ci/run installs chromium).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	testenv.Missing(t, "no chromium on PATH: the HTML report is not checked in a browser (apt-get install chromium)")
	return ""
}

// headless runs the browser on a local file with every network feature it
// has off, and returns its stdout and its log (where console messages go).
func headless(t *testing.T, browser, page string, args ...string) (stdout, log string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir(), "--enable-logging=stderr", "--v=0", "--window-size=1280,2400"}
	cmd := exec.CommandContext(ctx, browser, append(append(base, args...), "file://"+page)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\n%s", browser, err, errOut.String())
	}
	return out.String(), errOut.String()
}

// artifactDir is where the screenshot is kept: $RACETEST_ARTIFACTS (CI
// prints it), else the test's temporary directory.
func artifactDir(t *testing.T) string {
	if d := os.Getenv("RACETEST_ARTIFACTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

var (
	sectionRe = regexp.MustCompile(`(?s)<section class="case" id="case-(\d+)">(.*?)</section>`)
	histRe    = regexp.MustCompile(`(?s)<svg class="hist" data-kind="(\w+)" data-total="(\d+)".*?</svg>`)
	barRe     = regexp.MustCompile(`<rect class="bar[^"]*"[^>]*data-count="(\d+)"`)
	lanesRe   = regexp.MustCompile(`<svg class="timeline" data-lanes="(\d+)"`)
	laneRe    = regexp.MustCompile(`<g class="lane `)
	markRe    = regexp.MustCompile(`<circle class="mark `)
)

// The demo's HTML report, written from its saved JSON by 'racetest report',
// opens in a real browser without a console message, its script runs, and
// every case has its histograms and timeline with the counts of the JSON.
func TestHTMLReportInBrowser(t *testing.T) {
	browser := chromium(t)
	dir := artifactDir(t)
	out, errOut, code := execCmd(t, false, "demo", "--bursts", "20", "--format", "json")
	if code != 0 {
		t.Fatalf("demo: exit %d\n%s", code, errOut)
	}
	saved := filepath.Join(t.TempDir(), "demo.json")
	if err := os.WriteFile(saved, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	html, errOut, code := execCmd(t, false, "report", saved, "--format", "html")
	if code != 0 {
		t.Fatalf("report: exit %d\n%s", code, errOut)
	}
	page := filepath.Join(dir, "racetest-demo.html")
	if err := os.WriteFile(page, []byte(html), 0o644); err != nil {
		t.Fatal(err)
	}
	doc, err := report.ReadDocument(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}

	dom, log := headless(t, browser, page, "--dump-dom")
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, ":CONSOLE") {
			t.Errorf("the page logged to the console (it must log nothing): %s", line)
		}
	}
	if !strings.Contains(dom, `data-script="ran"`) {
		t.Error("the page's script did not run to its end")
	}
	sections := sectionRe.FindAllStringSubmatch(dom, -1)
	if len(sections) != len(doc.Runs) {
		t.Fatalf("the browser's DOM has %d case sections, the report %d runs", len(sections), len(doc.Runs))
	}
	for i, run := range doc.Runs {
		sec := sections[i][2]
		checkHistograms(t, run, sec)
		checkTimeline(t, run, sec)
		if len(run.Story) == 0 || !strings.Contains(sec, `<details class="story">`) {
			t.Errorf("%s: the scenario's story is not folded under the case (%d parts in the JSON)", run.Name, len(run.Story))
		}
	}

	shot := filepath.Join(dir, "racetest-demo.png")
	headless(t, browser, page, "--screenshot="+shot, "--hide-scrollbars")
	if st, err := os.Stat(shot); err != nil || st.Size() < 10_000 {
		t.Fatalf("screenshot %s: %v (size %v)", shot, err, st)
	}
	t.Logf("screenshot of the demo's HTML report: %s", shot)
}

// checkHistograms compares each histogram's bars with the bursts of run:
// the effects and overlap bars count the bursts of each value, the spread
// bars count every burst once.
func checkHistograms(t *testing.T, run report.RunJSON, sec string) {
	t.Helper()
	hists := histRe.FindAllStringSubmatch(sec, -1)
	if len(hists) != 3 {
		t.Errorf("%s: %d histograms in the DOM, want 3 (effects, overlap, spread)", run.Name, len(hists))
		return
	}
	for _, h := range hists {
		kind, total := h[1], h[2]
		if total != strconv.Itoa(run.Bursts) {
			t.Errorf("%s: %s histogram over %s bursts, the run had %d", run.Name, kind, total, run.Bursts)
		}
		var bars []int
		sum := 0
		for _, m := range barRe.FindAllStringSubmatch(h[0], -1) {
			n, _ := strconv.Atoi(m[1])
			bars = append(bars, n)
			sum += n
		}
		if sum != run.Bursts {
			t.Errorf("%s: the %s bars count %d bursts, the run had %d", run.Name, kind, sum, run.Bursts)
		}
		var value func(report.BurstJSON) int
		switch kind {
		case "effects":
			value = func(b report.BurstJSON) int { return b.Effects }
		case "overlap":
			value = func(b report.BurstJSON) int { return b.Overlap }
		default:
			continue
		}
		// The demo's values are few: one bar per value, from 0.
		want := make([]int, len(bars))
		for _, b := range run.PerBurst {
			if v := value(b); v < len(want) {
				want[v]++
			} else {
				t.Errorf("%s: a burst with %s %d has no bar (bars: %v)", run.Name, kind, v, bars)
			}
		}
		if !slices.Equal(bars, want) {
			t.Errorf("%s: %s bars %v, the bursts give %v", run.Name, kind, bars, want)
		}
	}
}

func checkTimeline(t *testing.T, run report.RunJSON, sec string) {
	t.Helper()
	m := lanesRe.FindStringSubmatch(sec)
	if run.Example == nil {
		if m != nil {
			t.Errorf("%s: a timeline without an example burst", run.Name)
		}
		return
	}
	if m == nil {
		t.Errorf("%s: no timeline in the DOM", run.Name)
		return
	}
	marks := 0
	for _, w := range run.Example.Workers {
		marks += len(w.Marks)
	}
	if lanes := len(laneRe.FindAllString(sec, -1)); m[1] != strconv.Itoa(len(run.Example.Workers)) || lanes != len(run.Example.Workers) {
		t.Errorf("%s: timeline has %s lanes (%d drawn), the worst burst %d workers", run.Name, m[1], lanes, len(run.Example.Workers))
	}
	if got := len(markRe.FindAllString(sec, -1)); got != marks {
		t.Errorf("%s: timeline has %d marks, the worst burst %d", run.Name, got, marks)
	}
}
