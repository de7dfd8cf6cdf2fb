package report

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/racetest/racetest/explore"
)

// TestExploreHTMLIsTheReportsPage: an exploration's page is the runs'
// embedded page (its style, its script, its Content-Security-Policy), with
// the verdict, the counts and each violating order's replay command.
func TestExploreHTMLIsTheReportsPage(t *testing.T) {
	race := Exploration{Name: "check-then-write", Backend: "memory", Expect: ExpectSafe, Replay: "racetest replay check-then-write",
		Settings: map[string]string{"attempts": "2"},
		Result: &explore.Result{Attempts: 2, Steps: []string{"check", "act"}, Total: "6", Server: "Example DB 1.0",
			Notes:  []string{"a note of the run"},
			Orders: []explore.Order{{Planned: "A1 B1 A2 B2", Schedule: "A1 B1 A2 B2", Effects: 2, Allowed: 1, Required: 1}}}}
	var run, exp bytes.Buffer
	if err := HTML(&run, fixedCases(), Options{Version: "test"}); err != nil {
		t.Fatal(err)
	}
	if err := ExploreHTML(&exp, race); err != nil {
		t.Fatal(err)
	}
	page := exp.String()
	runHead, _, _ := strings.Cut(run.String(), "<meta name=\"generator\"")
	for _, want := range []string{
		runHead, "<title>racetest explore: check-then-write on memory</title>", pageStyle[:80], "data-script",
		`<span class="verdict v-race">RACE</span> check-then-write`, "✗ not met: expected safe.</p>", "(Example DB 1.0)",
		"<td class=\"num\">1</td>", "--schedule &#39;A1 B1 A2 B2&#39;", "<dt>attempts</dt><dd>2</dd>", "<li>a note of the run</li>",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the exploration's page lacks %q:\n%s", want, page)
		}
	}
	if strings.Contains(page, "cases met their expectation") {
		t.Error("an exploration's page counts cases it does not have")
	}

	stopped := Exploration{Name: "x", Backend: "postgres", Expect: ExpectSafe, Err: errors.New("connection refused")}
	exp.Reset()
	if err := ExploreHTML(&exp, stopped); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(exp.String(), "<li>stopped: connection refused</li>") || !strings.Contains(exp.String(), "v-error") {
		t.Errorf("a stopped exploration's page does not say why:\n%s", exp.String())
	}
}
