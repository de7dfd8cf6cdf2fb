package httpfire

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"testing"
)

// FuzzRequest: a request template (URL, method, one header, body) that
// compiles renders, for any burst and token, to an HTTP/1.1 request that
// Go's own server reads back with the method, host and body rendered;
// nothing panics.
// Run it for real with: go test -run '^$' -fuzz '^FuzzRequest$' ./httpfire
func FuzzRequest(f *testing.F) {
	f.Add("http://127.0.0.1:8080/redeem/{{.Token}}", "POST", "X-Token: {{.Token}}", `{"burst": {{.Burst}}}`, "00ff", 3)
	f.Add("http://h/{{.Key}}?a={{.Attempt}}", "", "Cookie: a=b", "", "t", 0)
	f.Add("https://h:8443/x#frag", "PUT", "Host: other", "x", "t", 1)
	f.Add("http://h/{{.Token}}", "GET", "X: {{.Token}}", "", "a\r\nb", 1)
	f.Add("http://h/{{if .Burst}}a{{end}}", "DELETE", "X:", "{{.Nope}}", "", -1)
	f.Fuzz(func(t *testing.T, url, method, header, body, token string, burst int) {
		c, err := compile(Config{URL: url, Method: method, Headers: []string{header}, Body: body})
		if err != nil {
			return
		}
		r, err := c.render(Vars{Burst: burst, Attempt: 1, Token: token, RunID: "r", Key: "racetest_r_1"})
		if err != nil {
			return
		}
		req, head := c.http1(r)
		if head > len(req) {
			t.Fatalf("the head ends at %d of %d bytes", head, len(req))
		}
		got, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(req)))
		if err != nil {
			t.Fatalf("the rendered request does not read: %v\n%q", err, req)
		}
		b, err := io.ReadAll(got.Body)
		if err != nil || got.Method != c.method || !bytes.Equal(b, r.body) {
			t.Fatalf("read back as %s with body %q (%v), want %s and %q\n%q", got.Method, b, err, c.method, r.body, req)
		}
		if !r.has("Host") && got.Host != r.url.Host {
			t.Fatalf("host %q, want %q\n%q", got.Host, r.url.Host, req)
		}
	})
}

// A query with bytes a request line cannot carry (a token with a space, a
// URL written with one, non-ASCII; url.Parse refuses the controls) is sent
// percent-encoded, by the held
// release as by the naive one (net/http's client sends a query as written):
// the server reads the query the template rendered.
func TestQueryIsEscapedForTheRequestLine(t *testing.T) {
	c, err := compile(Config{URL: "http://h/x y?q={{.Token}}&r=é"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.render(Vars{Burst: 1, Attempt: 1, Token: "a b", RunID: "r", Key: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := requestTarget(r.url), "/x%20y?q=a%20b&r=%C3%A9"; got != want {
		t.Fatalf("request target %q, want %q", got, want)
	}
	if got, want := r.url.String(), "http://h/x%20y?q=a%20b&r=%C3%A9"; got != want {
		t.Fatalf("the naive release's URL %q, want %q", got, want)
	}
	req, _ := c.http1(r)
	got, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(req)))
	if err != nil {
		t.Fatalf("the request does not read: %v\n%q", err, req)
	}
	if q := got.URL.Query(); q.Get("q") != "a b" || q.Get("r") != "é" || got.URL.Path != "/x y" {
		t.Fatalf("the server read path %q and query %v", got.URL.Path, q)
	}
}
