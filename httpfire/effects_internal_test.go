package httpfire

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
)

// The effects check's small readers, each at the edge a wrong bound or
// condition would move (issue 27: these lived in a whole run of httpfire).
func TestEffectsReadersAtTheirEdges(t *testing.T) {
	tg := &Target{}
	for _, spec := range []string{"mongo:db.:{}", "mongo:.coll:{}", "mongo:dbcoll:{}"} {
		if _, err := parseCheck("effects", spec, tg); err == nil || !strings.Contains(err.Error(), "DB.COLLECTION") {
			t.Errorf("%s: %v, want it refused: name the collection as DB.COLLECTION", spec, err)
		}
	}
	if _, err := parseCheck("effects", "mongo:db.coll:{}", tg); err != nil {
		t.Errorf("mongo:db.coll:{}: %v, want it read", err)
	}
	// No PostgreSQL URL given: the default one, not an error.
	c, err := parseCheck("effects", "sql:postgres:SELECT 1", tg)
	if err != nil {
		t.Fatalf("sql:postgres with no --postgres-url: %v, want the default URL", err)
	}
	if d := c.describe(); !strings.Contains(d, "127.0.0.1:5432") {
		t.Errorf("sql:postgres with no --postgres-url checks %q, want the default server 127.0.0.1:5432", d)
	}
	// MongoDB: the URI given, else the default one.
	for uri, want := range map[string]string{"": defaultMongoURI, "mongodb://10.0.0.9:27018/": "mongodb://10.0.0.9:27018/"} {
		mt := &Target{p: scenarios.Params{Conn: scenarios.NewConnections(map[string]string{"mongo": uri})}}
		c, err := parseCheck("effects", "mongo:db.coll:{}", mt)
		if err != nil {
			t.Fatalf("mongo with URI %q: %v", uri, err)
		}
		if got := c.(*mongoCheck).uri; got != want {
			t.Errorf("mongo with URI %q checks %q, want %q", uri, got, want)
		}
	}
	for v, ok := range map[float64]bool{3: true, 0: true, -1: false, 2.5: false, math.Inf(1): false} {
		if _, err := number(v); (err == nil) != ok {
			t.Errorf("number(%v): error %v, want a count: %v", v, err, ok)
		}
	}
	if got := truncate("abc", 3); got != "abc" {
		t.Errorf("truncate to its own length: %q, want it whole", got)
	}
	if got := truncate("abcd", 3); got != "abc…" {
		t.Errorf("truncate(abcd, 3) = %q, want abc…", got)
	}
	if got := redactURL("postgres://u:secret@h/db"); strings.Contains(got, "secret") {
		t.Errorf("redactURL kept the password: %q", got)
	}
	if got := redactURL("postgres://h:port/db"); got != "(unparsable URL)" {
		t.Errorf("redactURL of an unparsable URL: %q", got)
	}
	// Closed before it was opened (a run that failed at its start): nothing
	// to close, no error.
	for _, c := range []effectsCheck{&mysqlCheck{}, &pgCheck{}, &redisCheck{}, &mongoCheck{}, &httpCheck{}} {
		if err := c.close(); err != nil {
			t.Errorf("%T closed unopened: %v", c, err)
		}
	}
}

// The burst's credentials go to the target's own scheme and host, or to a
// host the user named: never to the target's host over another scheme (an
// https target's token sent in clear over http).
func TestCredentialsGoOnlyWhereAllowed(t *testing.T) {
	tg := &Target{c: &compiled{host: "api.example", scheme: "https", cfg: Config{CredentialsTo: []string{"auth.example"}}}}
	for raw, want := range map[string]bool{
		"https://api.example/count":  true,
		"https://API.example/x":      true,
		"http://api.example/count":   false,
		"https://evil.example/":      false,
		"https://auth.example:8443/": true,
		"http://auth.example/":       true,
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if got := tg.credentialsGo(u); got != want {
			t.Errorf("credentials to %s: %v, want %v", raw, got, want)
		}
	}
}

// Status lists: codes from 100 to 599, classes 1xx to 5xx.
func TestCompileStatusesAtTheirEdges(t *testing.T) {
	r, err := compileStatuses([]string{"100, 599", "2xx,5XX"}, "success.status")
	if err != nil {
		t.Fatal(err)
	}
	if !r.codes[100] || !r.codes[599] || len(r.codes) != 2 {
		t.Errorf("codes %v, want 100 and 599", r.codes)
	}
	if !r.classes[2] || !r.classes[5] || len(r.classes) != 2 {
		t.Errorf("classes %v, want 2 and 5", r.classes)
	}
	for _, bad := range []string{"99", "600", "6xx", "0xx", "abc"} {
		if _, err := compileStatuses([]string{bad}, "success.status"); err == nil {
			t.Errorf("%q read as a status, want it refused", bad)
		}
	}
}

// The success rule says what it checks: the status part only when statuses
// are set (codes, classes, or both), the body part only when a pattern is.
func TestRulesDescribeWhatTheyCheck(t *testing.T) {
	for _, c := range []struct {
		r    rules
		s    Success
		want string
	}{
		{rules{codes: map[int]bool{200: true}}, Success{Status: []string{"200"}}, "status 200"},
		{rules{classes: map[int]bool{2: true}}, Success{Status: []string{"2xx"}}, "status 2xx"},
		{rules{body: regexp.MustCompile("ok")}, Success{Body: "ok"}, "body matches /ok/"},
		{rules{codes: map[int]bool{201: true}, body: regexp.MustCompile("ok")}, Success{Status: []string{"201"}}, "status 201 and body matches /ok/"},
	} {
		if got := c.r.describe(c.s); got != c.want {
			t.Errorf("describe = %q, want %q", got, c.want)
		}
	}
}

// A success rule with statuses but no list says 2xx; a declined class
// refuses by its hundred; an error's first line is cut at 100 characters.
func TestRulesDefaultsAndDeclinedClasses(t *testing.T) {
	if got := (rules{classes: map[int]bool{2: true}}).describe(Success{}); got != "status 2xx" {
		t.Errorf("describe with no status list = %q, want status 2xx", got)
	}
	r := rules{codes: map[int]bool{200: true}, declined: &rules{classes: map[int]bool{4: true}}}
	if o := r.classify(409, nil); o.Class != runner.Refused(nil).Class {
		t.Errorf("409 with 4xx declined: %v, want refused", o.Class)
	}
	if o := r.classify(302, nil); o.Class != runner.Error {
		t.Errorf("302 with 4xx declined: %v, want an error (not a declined status)", o.Class)
	}
	long := strings.Repeat("é", 100)
	if got := firstLine([]byte("\n  \n" + long + "\nnext")); got != long {
		t.Errorf("firstLine of a 100-character line: %q, want it whole", got)
	}
	if got := firstLine([]byte(long + "x")); got != long+"…" {
		t.Errorf("firstLine of 101 characters: %q, want 100 and …", got)
	}
}

// A server that announces no stream limit (HTTP/2's SETTINGS without
// MAX_CONCURRENT_STREAMS: unlimited) keeps auto's single-packet whatever
// the burst's size; only a limit below the burst moves it to last-byte.
func TestAutoKeepsSinglePacketWithoutAStreamLimit(t *testing.T) {
	tg, err := New(Config{Method: "POST", URL: "http://127.0.0.1:9/?key={{.Token}}"}, scenarios.Params{})
	if err != nil {
		t.Fatal(err)
	}
	tg.c.auto, tg.c.release, tg.maxStreams = "negotiated h2c", SinglePacket, 0
	if app, err := tg.Open(context.Background(), 0, 64); err == nil {
		app.Close()
	}
	if tg.c.release != SinglePacket {
		t.Errorf("64 attempts on a server with no stream limit: release %s, want single-packet", tg.c.release)
	}
}

// A setup or effects URL with a space in its query (a key rendered into
// it) reaches the server percent-encoded: net/http's client sends a query
// as written, and the server refused the request line as malformed.
func TestAsideEscapesTheQuery(t *testing.T) {
	var got atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.URL.Query().Get("k"))
		fmt.Fprint(w, "1")
	}))
	defer srv.Close()
	tg, err := New(Config{URL: srv.URL + "/"}, scenarios.Params{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tg.aside(context.Background(), "GET", srv.URL+"/count?k=a b", Vars{}); err != nil {
		t.Fatalf("GET with a space in the query: %v", err)
	}
	if k, _ := got.Load().(string); k != "a b" {
		t.Fatalf("the server read k=%q, want %q", k, "a b")
	}
}

// A sql: check that writes is refused from its text, before anything
// connects (a query that passes still runs in a read-only transaction).
func TestSQLCheckThatWritesIsRefusedFirst(t *testing.T) {
	tg, err := New(Config{URL: "http://127.0.0.1:9/"}, scenarios.Params{})
	if err != nil {
		t.Fatal(err)
	}
	var ie *InputError
	for _, q := range []string{"DELETE FROM t", "UPDATE t SET v = v + 100 WHERE k = '{{.Token}}'"} {
		if _, err := parseCheck("effects", "sql:postgres:"+q, tg); !errors.As(err, &ie) || !strings.Contains(err.Error(), "is not a query") {
			t.Errorf("%q: %v, want refused as no query", q, err)
		}
	}
	if _, err := parseCheck("effects", "sql:postgres:SELECT count(*) FROM t WHERE k = '{{.Token}}'", tg); err != nil {
		t.Errorf("a query: %v", err)
	}
}
