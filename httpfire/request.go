package httpfire

import (
	"bytes"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"text/template"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2/hpack"
)

// userAgent names racetest to the server unless a -H says otherwise.
const userAgent = "racetest"

// rendered is one attempt's request, templates filled in.
type rendered struct {
	url     *url.URL
	headers [][2]string // in the order given, names as given
	body    []byte
}

func execute(t *template.Template, v Vars) (string, error) {
	var b strings.Builder
	if err := t.Execute(&b, v); err != nil {
		return "", inputErrorf(t.Name(), "%w", err)
	}
	return b.String(), nil
}

func (c *compiled) render(v Vars) (rendered, error) {
	var r rendered
	raw, err := execute(c.url, v)
	if err != nil {
		return r, err
	}
	if r.url, err = parseTarget("url", raw); err != nil {
		return r, err
	}
	if c.host != "" && (r.url.Host != c.host || r.url.Scheme != c.scheme) {
		return r, inputErrorf("url", "the template changed the host to %s://%s: every attempt must go to %s://%s, over the connections warmed for it",
			r.url.Scheme, r.url.Host, c.scheme, c.host)
	}
	for _, h := range c.headers {
		v, err := execute(h.value, v)
		if err != nil {
			return r, err
		}
		if !httpguts.ValidHeaderFieldValue(v) {
			return r, inputErrorf("header", "the value of %s has characters a header cannot carry (a newline or a control character)", h.name)
		}
		r.headers = append(r.headers, [2]string{h.name, v})
	}
	if c.cookie != "" {
		r.headers = append(r.headers, [2]string{"Cookie", c.cookie})
	}
	body, err := execute(c.body, v)
	if err != nil {
		return r, err
	}
	r.body = []byte(body)
	return r, nil
}

func (r rendered) has(name string) bool {
	for _, h := range r.headers {
		if strings.EqualFold(h[0], name) {
			return true
		}
	}
	return false
}

// needsLength: a request with a body, or one whose method usually carries
// one, says how long it is, so the server never waits for more.
func needsLength(method string, body []byte) bool {
	switch method {
	case "POST", "PUT", "PATCH":
		return true
	}
	return len(body) > 0
}

// http1 serialises r as an HTTP/1.1 request; head is where the header block
// ends and the body begins.
func (c *compiled) http1(r rendered) (req []byte, head int) {
	var b bytes.Buffer
	b.WriteString(c.method)
	b.WriteByte(' ')
	b.WriteString(requestTarget(r.url))
	b.WriteString(" HTTP/1.1\r\n")
	if !r.has("Host") {
		b.WriteString("Host: " + r.url.Host + "\r\n")
	}
	if !r.has("User-Agent") {
		b.WriteString("User-Agent: " + userAgent + "\r\n")
	}
	for _, h := range r.headers {
		b.WriteString(h[0] + ": " + h[1] + "\r\n")
	}
	if needsLength(c.method, r.body) {
		b.WriteString("Content-Length: " + strconv.Itoa(len(r.body)) + "\r\n")
	}
	b.WriteString("\r\n")
	head = b.Len()
	b.Write(r.body)
	return b.Bytes(), head
}

func requestTarget(u *url.URL) string {
	t := u.RequestURI()
	if t == "" {
		return "/"
	}
	return t
}

// escapeQuery percent-encodes the bytes of u's query that a request line
// cannot carry (controls, space, DEL, non-ASCII; RFC 9112 §3.2), as a
// browser sends them. url.Parse keeps a query as written, and net/http's
// client sends it so: a URL with a space in its query, written or rendered
// from "?q={{.Token}}", ended the request target early, and the server
// refused every attempt as malformed (found by FuzzRequest). The path
// needs nothing: url.URL escapes it.
func escapeQuery(u *url.URL) {
	q := u.RawQuery
	for i := 0; i < len(q); i++ {
		if unsafeInTarget(q[i]) {
			u.RawQuery = escapeFrom(q, i)
			return
		}
	}
}

func unsafeInTarget(c byte) bool { return c <= ' ' || c >= 0x7f }

// escapeFrom percent-encodes s's unsafe bytes, the first at i.
func escapeFrom(s string, i int) string {
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for ; i < len(s); i++ {
		if c := s[i]; unsafeInTarget(c) {
			fmt.Fprintf(&b, "%%%02X", c)
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}

// hopByHop are the header fields HTTP/2 forbids (RFC 9113 §8.2.2).
var hopByHop = map[string]bool{
	"connection": true, "keep-alive": true, "proxy-connection": true,
	"transfer-encoding": true, "upgrade": true, "host": true, "te": true,
}

// http2Fields is r as an HTTP/2 header list, pseudo-headers first.
func (c *compiled) http2Fields(r rendered) []hpack.HeaderField {
	authority := r.url.Host
	for _, h := range r.headers {
		if strings.EqualFold(h[0], "Host") {
			authority = h[1]
		}
	}
	f := []hpack.HeaderField{
		{Name: ":method", Value: c.method},
		{Name: ":scheme", Value: r.url.Scheme},
		{Name: ":authority", Value: authority},
		{Name: ":path", Value: requestTarget(r.url)},
	}
	if !r.has("User-Agent") {
		f = append(f, hpack.HeaderField{Name: "user-agent", Value: userAgent})
	}
	for _, h := range r.headers {
		name := strings.ToLower(h[0])
		if hopByHop[name] {
			continue
		}
		f = append(f, hpack.HeaderField{Name: name, Value: h[1]})
	}
	if needsLength(c.method, r.body) {
		f = append(f, hpack.HeaderField{Name: "content-length", Value: strconv.Itoa(len(r.body))})
	}
	return f
}

// describe is the request line a report shows.
func (c *compiled) describe() string {
	return fmt.Sprintf("%s %s", c.method, c.cfg.URL)
}
