package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/racetest/racetest/httpfire"
)

func TestHTTPFlagsParse(t *testing.T) {
	body := filepath.Join(t.TempDir(), "body.json")
	f := &factory{IO: func() *ioStreams { io, _, _ := testStreams(); return io }(), Registry: memoryOnly()}
	var got *httpOptions
	c := newCmdHTTP(f, func(_ context.Context, o *httpOptions) error { got = o; return nil })
	c.SetArgs([]string{"PUT", "https://h/x?t={{.Token}}", "-H", "A: b", "-H", "C: d", "-d", "@" + body, "--cookie", "s=1",
		"-n", "20", "--bursts", "5", "--success", "200,201", "--success-body", "ok", "--effects", "http:https://h/c",
		"--release", "last-byte", "-k", "--timeout", "3s", "--expect", "race", "--allowed", "2", "--warmup", "https://h/ping",
		"--redis-url", "redis://r:6379/1"})
	if err := c.Execute(); err != nil {
		t.Fatal(err)
	}
	cfg := got.Config
	if cfg.Method != "PUT" || cfg.URL != "https://h/x?t={{.Token}}" || strings.Join(cfg.Headers, "|") != "A: b|C: d" ||
		got.Data != "@"+body || strings.Join(cfg.Cookies, "|") != "s=1" || got.Shape.Attempts != 20 || got.Shape.Bursts != 5 ||
		strings.Join(cfg.Success.Status, "|") != "200|201" || cfg.Success.Body != "ok" || cfg.Effects != "http:https://h/c" ||
		cfg.Release != httpfire.LastByte || !cfg.Insecure || got.Shape.Timeout != 3*time.Second || got.Expect != "race" ||
		got.Shape.Allowed != "2" || cfg.Warmup != "https://h/ping" || got.Shape.Conn.Get("redis") != "redis://r:6379/1" {
		t.Errorf("parsed options = %+v", got)
	}
}

func TestHTTPDefaults(t *testing.T) {
	f := &factory{IO: func() *ioStreams { io, _, _ := testStreams(); return io }(), Registry: memoryOnly()}
	var got *httpOptions
	c := newCmdHTTP(f, func(_ context.Context, o *httpOptions) error { got = o; return nil })
	c.SetArgs([]string{"http://h/"})
	if err := c.Execute(); err != nil {
		t.Fatal(err)
	}
	if got.Config.Method != "" || got.Config.Release != httpfire.Auto || got.Shape.Attempts != 16 || got.Shape.Bursts != 100 ||
		got.Shape.Allowed != "1" || got.Shape.Timeout != httpfire.DefaultTimeout || got.Expect != "safe" {
		t.Errorf("defaults = %+v", got)
	}
}

// counter is an endpoint that races on purpose: check, pause, write.
type counter struct {
	mu     sync.Mutex
	writes map[string]int
}

func (c *counter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.RequestURI == "*" {
		// --release auto's probe for h2c ("PRI *"): no resource, as
		// net/http's ServeMux answers it.
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	io.Copy(io.Discard, r.Body)
	key := r.URL.Query().Get("k")
	c.mu.Lock()
	n := c.writes[key]
	c.mu.Unlock()
	if r.URL.Path == "/count" {
		fmt.Fprint(w, n)
		return
	}
	if n > 0 {
		w.WriteHeader(http.StatusConflict)
		return
	}
	time.Sleep(2 * time.Millisecond)
	c.mu.Lock()
	c.writes[key]++
	c.mu.Unlock()
}

func TestHTTPRunsAndReports(t *testing.T) {
	srv := httptest.NewServer(&counter{writes: map[string]int{}})
	defer srv.Close()
	out, errOut, code := execCmd(t, false, "http", "POST", srv.URL+"/?k={{.Token}}", "-n", "6", "--bursts", "10",
		"--effects", "http:"+srv.URL+"/count?k={{.Token}}", "--release", "last-byte", "--expect", "race")
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"RACE", "release: last-byte", "said success:", "actually happened:", "server: " + srv.URL} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	out, _, code = execCmd(t, false, "http", "POST", srv.URL+"/?k={{.Token}}", "-n", "4", "--bursts", "3", "-o", "json")
	if code != exitViolated {
		t.Errorf("expected safe, the endpoint races: exit %d, want %d", code, exitViolated)
	}
	var doc struct {
		Runs []struct {
			Release string   `json:"release"`
			Notes   []string `json:"notes"`
		} `json:"runs"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc.Runs) != 1 || doc.Runs[0].Release != "last-byte" {
		// The default, auto, asked the HTTP/1.1-only server and chose last-byte.
		t.Fatalf("json %v: %s", err, out)
	}
	if !strings.Contains(strings.Join(doc.Runs[0].Notes, "\n"), "no effects check: counting the responses") {
		t.Errorf("without --effects the report must say the count is the server's claim: %v", doc.Runs[0].Notes)
	}
}

func TestHTTPBadInputExitCodes(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := ln.Addr().String()
	ln.Close()
	h1 := httptest.NewServer(http.NotFoundHandler())
	defer h1.Close()
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"http", "localhost:8080/x"}, exitUsage, "must start with http://"},
		{[]string{"http", "http://h/{{.Bad}}"}, exitUsage, "Bad"},
		{[]string{"http", "http://h/", "--release", "fastest"}, exitUsage, "unknown release mode"},
		{[]string{"http", "http://h/", "--effects", "sqlite:x"}, exitUsage, "unknown kind"},
		{[]string{"http", "GET", "http://h/", "-X", "POST"}, exitUsage, "two methods"},
		{[]string{"http", "http://h/", "-n", "0"}, exitUsage, "--attempts must be at least 1"},
		{[]string{"http", "http://" + refused + "/", "--bursts", "1"}, exitSetup, "connection refused"},
		{[]string{"http", h1.URL, "--release", "single-packet", "--bursts", "1"}, exitSetup, "HTTP/1.1 only"},
	} {
		t.Run(strings.Join(c.args[1:], " "), func(t *testing.T) {
			_, errOut, code := execCmd(t, false, c.args...)
			if code != c.code || !strings.Contains(errOut, c.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, errOut, c.code, c.want)
			}
			if strings.Contains(errOut, "open replica") {
				t.Errorf("the error speaks of the engine, not the target: %q", errOut)
			}
		})
	}
}

func TestHTTPBodyFromFile(t *testing.T) {
	got := make(chan string, 8)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "PRI" {
			// --release auto asks whether the server speaks h2c: to this
			// HTTP/1.1 server, a request for "*".
			http.Error(w, "HTTP/1.1 only", http.StatusHTTPVersionNotSupported)
			return
		}
		b, _ := io.ReadAll(r.Body)
		got <- r.Method + " " + string(b)
	}))
	defer srv.Close()
	body := filepath.Join(t.TempDir(), "body.json")
	os.WriteFile(body, []byte(`{"burst": {{.Burst}}}`), 0o600)
	if _, errOut, code := execCmd(t, false, "http", srv.URL, "-d", "@"+body, "-n", "2", "--bursts", "1"); code != exitOK && code != exitViolated {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if s := <-got; s != `POST {"burst": 0}` {
		t.Errorf("the server got %q", s)
	}
}
