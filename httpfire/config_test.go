package httpfire

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
)

func TestCompileRejectsBadInput(t *testing.T) {
	dir := t.TempDir()
	body := filepath.Join(dir, "body.json")
	os.WriteFile(body, []byte(`{"a":1}`), 0o600)
	cases := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no scheme", Config{URL: "localhost:8080/x"}, "http://"},
		{"ftp", Config{URL: "ftp://host/x"}, "http://"},
		{"no host", Config{URL: "http:///x"}, "no host"},
		{"bad port", Config{URL: "http://host:99999/"}, "bad port"},
		{"unparsable", Config{URL: "http://[::1/"}, "malformed URL"},
		{"credentials", Config{URL: "http://u:secret@host/"}, "credentials"},
		{"unknown field", Config{URL: "http://host/{{.Nope}}"}, "Nope"},
		{"broken template", Config{URL: "http://host/{{.Burst"}, "bad template"},
		{"header line", Config{URL: "http://h/", Headers: []string{"NoColon"}}, "header line"},
		{"framing header", Config{URL: "http://h/", Headers: []string{"Content-Length: 3"}}, "set by racetest"},
		{"cookie", Config{URL: "http://h/", Cookies: []string{"novalue"}}, "not a cookie"},
		{"status", Config{URL: "http://h/", Success: Success{Status: []string{"20"}}}, "not a status code"},
		{"regexp", Config{URL: "http://h/", Success: Success{Body: "("}}, "regular expression"},
		{"release", Config{URL: "http://h/", Release: "fast"}, "unknown release mode"},
		{"two bodies", Config{URL: "http://h/", Body: "x", BodyFile: body}, "not both"},
		{"missing body file", Config{URL: "http://h/", BodyFile: filepath.Join(dir, "nope")}, "body_file"},
		{"effects kind", Config{URL: "http://h/", Effects: "sqlite:SELECT 1"}, "unknown kind"},
		{"effects sql server", Config{URL: "http://h/", Effects: "sql:oracle:SELECT 1"}, "unknown SQL server"},
		{"effects mongo ns", Config{URL: "http://h/", Effects: "mongo:nocollection:{}"}, "DB.COLLECTION"},
		{"effects mongo filter", Config{URL: "http://h/", Effects: "mongo:db.c:{bad"}, "not JSON"},
		{"effects url", Config{URL: "http://h/", Effects: "http:not a url"}, "http://"},
		{"host from template", Config{URL: "http://h{{.Attempt}}/"}, ""},
		{"setup method", Config{URL: "http://h/", Setup: "P@ST http://h/"}, "not an HTTP method"},
		{"setup url", Config{URL: "http://h/", Setup: "PUT h/x"}, "http://"},
		{"warmup elsewhere", Config{URL: "http://h/", Warmup: "http://other/"}, "target's host"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := New(c.cfg, scenarios.Params{RunID: "t"})
			if c.want == "" {
				// The host is fixed by the sample attempt; attempt 1 would move it.
				cc, cerr := compile(c.cfg)
				if cerr != nil {
					t.Fatal(cerr)
				}
				if _, err := cc.render(Vars{Attempt: 1}); err == nil || !strings.Contains(err.Error(), "every attempt must go to") {
					t.Fatalf("a templated host was accepted: %v", err)
				}
				return
			}
			var in *InputError
			if !errors.As(err, &in) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want an InputError mentioning %q", err, c.want)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("the error shows the password: %v", err)
			}
		})
	}
}

func TestRenderHTTP1(t *testing.T) {
	c, err := compile(Config{
		Method:  "post",
		URL:     "http://example.test:8080/redeem/{{.Burst}}?code={{.Token}}&a={{.Attempt}}",
		Headers: []string{"Authorization: Bearer {{.RunID}}", "X-Key: {{.Key}}"},
		Cookies: []string{"s=1"},
		Body:    `{"attempt":{{.Attempt}}}`,
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.render(Vars{Burst: 7, Attempt: 3, Token: "abc", RunID: "run1", Key: "racetest_run1_7"})
	if err != nil {
		t.Fatal(err)
	}
	req, head := c.http1(r)
	want := "POST /redeem/7?code=abc&a=3 HTTP/1.1\r\nHost: example.test:8080\r\nUser-Agent: racetest\r\n" +
		"Authorization: Bearer run1\r\nX-Key: racetest_run1_7\r\nCookie: s=1\r\nContent-Length: 13\r\n\r\n"
	if string(req[:head]) != want {
		t.Errorf("head:\n%q\nwant\n%q", req[:head], want)
	}
	if string(req[head:]) != `{"attempt":3}` {
		t.Errorf("body %q", req[head:])
	}
	fields := c.http2Fields(r)
	got := map[string]string{}
	for _, f := range fields {
		got[f.Name] = f.Value
	}
	if got[":method"] != "POST" || got[":authority"] != "example.test:8080" || got[":path"] != "/redeem/7?code=abc&a=3" ||
		got["content-length"] != "13" || got["authorization"] != "Bearer run1" || fields[0].Name != ":method" {
		t.Errorf("HTTP/2 fields %v", fields)
	}
}

func TestRenderGETHasNoBody(t *testing.T) {
	c, err := compile(Config{URL: "http://h/x"})
	if err != nil {
		t.Fatal(err)
	}
	r, _ := c.render(Vars{})
	req, head := c.http1(r)
	if head != len(req) || strings.Contains(string(req), "Content-Length") || !strings.HasPrefix(string(req), "GET /x HTTP/1.1\r\n") {
		t.Errorf("GET request %q", req)
	}
	c, _ = compile(Config{URL: "http://h/x", Method: "POST"})
	r, _ = c.render(Vars{})
	if req, _ := c.http1(r); !strings.Contains(string(req), "Content-Length: 0\r\n") {
		t.Errorf("an empty POST must say its length: %q", req)
	}
}

func TestSuccessRules(t *testing.T) {
	cases := []struct {
		rule   Success
		status int
		body   string
		want   runner.Class
	}{
		{Success{}, 200, "", runner.Executed},
		{Success{}, 204, "", runner.Executed},
		{Success{}, 409, "", runner.Declined},
		{Success{}, 302, "", runner.Declined},
		{Success{}, 500, "", runner.Error},
		{Success{}, 503, "", runner.Error},
		{Success{Status: []string{"201"}}, 200, "", runner.Declined},
		{Success{Status: []string{"200,201"}}, 201, "", runner.Executed},
		{Success{Status: []string{"2xx", "302"}}, 302, "", runner.Executed},
		{Success{Body: `"paid":\s*true`}, 200, `{"paid": true}`, runner.Executed},
		{Success{Body: `"paid":\s*true`}, 200, `{"paid": false}`, runner.Declined},
		{Success{Body: `ok`}, 409, `ok`, runner.Executed}, // the body alone decides
		{Success{Status: []string{"200"}, Body: `ok`}, 409, `ok`, runner.Declined},
		{Success{Status: []string{"500"}}, 500, "", runner.Executed},
		// A request refused as such is not "already done" (issue 10 §1).
		{Success{}, 404, "", runner.Error},
		{Success{}, 401, "", runner.Error},
		{Success{}, 429, "", runner.Error},
		{Success{}, 422, "", runner.Declined},
		{Success{Declined: []string{"404"}}, 404, "", runner.Declined},
		{Success{Declined: []string{"404"}}, 409, "", runner.Error},
		{Success{Status: []string{"404"}}, 404, "", runner.Executed},
	}
	for _, c := range cases {
		r, err := compileRules(c.rule)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.classify(c.status, []byte(c.body)); got.Class != c.want {
			t.Errorf("%+v on %d %q: %v, want %v (%v)", c.rule, c.status, c.body, got.Class, c.want, got.Err)
		}
	}
}

func TestCountFromBody(t *testing.T) {
	for body, want := range map[string]int{"3": 3, " 2\n": 2, `{"count": 4}`: 4, `{"count": 1, "key": "x"}`: 1, "0": 0, "5.0": 5} {
		if n, err := countFromBody([]byte(body)); err != nil || n != want {
			t.Errorf("%q: %d, %v; want %d", body, n, err, want)
		}
	}
	for _, body := range []string{"", "many", `{"a": 1, "b": 2}`, "1.5", "-1.5"} {
		if n, err := countFromBody([]byte(body)); err == nil {
			t.Errorf("%q read as %d", body, n)
		}
	}
}
