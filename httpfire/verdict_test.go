package httpfire_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/racetest/racetest/httpfire"
	"github.com/racetest/racetest/report"
)

// A typo'd path answers 404 to every request: nothing was tested, and the
// report says why instead of SAFE (issue 10 §1).
func TestEvery404IsInconclusive(t *testing.T) {
	srv := newServer(t, plainH1, http.NotFoundHandler())
	res, _ := run(t, httpfire.Config{Method: "POST", URL: srv.URL + "/redeeem?code={{.Token}}"}, 4, 5)
	a := report.Assess(report.Case{Expect: report.Expect{Kind: report.ExpectSafe}, Result: res})
	if a.Verdict != report.Inconclusive {
		t.Fatalf("every response 404: %s (%s), want INCONCLUSIVE", a.Verdict, a.Why)
	}
	want := "0 of 5 bursts executed anything: no request succeeded: 404 ×20 — is the URL right? does each burst need --setup?"
	if a.Why != want {
		t.Errorf("why = %q\nwant  %q", a.Why, want)
	}
	if !a.Met {
		t.Errorf("without --strict an INCONCLUSIVE run meets safe; got unmet: %s", a.Why)
	}
}

// The http: effects check and the setup request carry the burst's
// Authorization header and cookies to the target's own host only (§6).
func TestCredentialsStayOnTheTargetsHost(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	other := newServer(t, plainH1, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization")+"|"+r.Header.Get("Cookie"))
		mu.Unlock()
		w.Write([]byte("1"))
	}))
	target := newServer(t, plainH1, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	cfg := httpfire.Config{Method: "POST", URL: target.URL + "/?k={{.Token}}", Headers: []string{"Authorization: Bearer s3cret"},
		Cookies: []string{"session=abc"}, Effects: "http:" + other.URL + "/count?k={{.Token}}"}
	// Both test servers listen on 127.0.0.1: a different port is a different host.
	run(t, cfg, 2, 2)
	mu.Lock()
	for _, s := range seen {
		if strings.Contains(s, "s3cret") || strings.Contains(s, "abc") {
			t.Errorf("credentials went to another host unasked: %q", s)
		}
	}
	seen = nil
	mu.Unlock()
	cfg.CredentialsTo = []string{strings.TrimPrefix(other.URL, "http://")}
	run(t, cfg, 2, 2)
	mu.Lock()
	defer mu.Unlock()
	if len(seen) == 0 || seen[0] != "Bearer s3cret|session=abc" {
		t.Errorf("named in CredentialsTo, the host got %q", seen)
	}
}
