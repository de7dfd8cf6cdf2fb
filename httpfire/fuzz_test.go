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
