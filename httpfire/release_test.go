package httpfire_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/racetest/racetest/httpfire"
	"github.com/racetest/racetest/httpfire/httpfiretest"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
)

// server kinds a release mode can meet.
const (
	plainH1 = "http/1.1"
	tlsH1   = "https http/1.1 only"
	tlsH2   = "https with h2"
	h2c     = "h2c"
)

func newServer(t testing.TB, kind string, h http.Handler) *httptest.Server {
	t.Helper()
	srv := startServer(kind, h)
	t.Cleanup(srv.Close)
	return srv
}

// startServer starts h speaking kind's protocol (plain HTTP/1.1 by default).
func startServer(kind string, h http.Handler) *httptest.Server {
	srv := httptest.NewUnstartedServer(h)
	switch kind {
	case tlsH1:
		srv.StartTLS()
	case tlsH2:
		srv.EnableHTTP2 = true
		srv.StartTLS()
	case h2c:
		srv.Config.Protocols = new(http.Protocols)
		srv.Config.Protocols.SetHTTP1(true)
		srv.Config.Protocols.SetUnencryptedHTTP2(true)
		srv.Start()
	default:
		srv.Start()
	}
	return srv
}

func params() scenarios.Params { return scenarios.Params{RunID: scenarios.NewRunID()} }

func ctwConfig(url string, mode httpfire.Release) httpfire.Config {
	return httpfire.Config{
		Method:  "POST",
		URL:     url + "/?key={{.Token}}",
		Body:    `{"attempt": {{.Attempt}}}`,
		Effects: "http:" + url + "/count?key={{.Token}}",
		Release: mode,
		// The test servers' certificates are self-signed.
		Insecure: true,
		Timeout:  5 * time.Second,
	}
}

func run(t *testing.T, cfg httpfire.Config, n, bursts int) (*runner.Result, *httpfire.Target) {
	t.Helper()
	target, err := httpfire.New(cfg, params())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := runner.Run(ctx, target, runner.Attempts(n), runner.Bursts(bursts), runner.Timeout(5*time.Second))
	if err != nil {
		t.Fatalf("%s: %v", cfg.Release, err)
	}
	return res, target
}

// Every release mode, on every server that supports it, gets an answer for
// every attempt, and the server's own count agrees with the 200s it sent.
func TestReleaseModes(t *testing.T) {
	cases := []struct {
		mode   httpfire.Release
		server string
	}{
		{httpfire.Barrier, plainH1},
		{httpfire.Barrier, tlsH2}, // ALPN offers http/1.1 only: the server falls back
		{httpfire.LastByte, plainH1},
		{httpfire.LastByte, tlsH1},
		{httpfire.LastByte, tlsH2},
		{httpfire.SinglePacket, tlsH2},
		{httpfire.SinglePacket, h2c},
		{httpfire.Naive, plainH1},
	}
	for _, c := range cases {
		t.Run(string(c.mode)+" on "+c.server, func(t *testing.T) {
			ctw := httpfiretest.NewCheckThenWrite(0)
			protos := make(chan string, 1000)
			srv := newServer(t, c.server, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/count" { // the effects check's GET is not a burst's request
					protos <- r.Proto
				}
				ctw.ServeHTTP(w, r)
			}))
			const n, bursts = 6, 12
			res, target := run(t, ctwConfig(srv.URL, c.mode), n, bursts)
			if len(res.Bursts) != bursts {
				t.Fatalf("%d bursts, want %d", len(res.Bursts), bursts)
			}
			for _, b := range res.Bursts {
				o := b.Outcomes
				if o[runner.Executed]+o[runner.Declined] != n {
					t.Errorf("burst %d: outcomes %v, want %d answered (errors: %v)", b.Index, o, n, res.Errors)
				}
				if b.Effects < 1 || b.Effects != o[runner.Executed] {
					t.Errorf("burst %d: the server counted %d writes but answered 200 %d times", b.Index, b.Effects, o[runner.Executed])
				}
			}
			if len(ctw.Keys()) != bursts {
				t.Errorf("the server saw %d distinct tokens, want one per burst (%d)", len(ctw.Keys()), bursts)
			}
			close(protos)
			want := "HTTP/1.1"
			if c.mode == httpfire.SinglePacket {
				want = "HTTP/2.0"
			}
			for p := range protos {
				if p != want {
					t.Fatalf("the server saw %s, want %s", p, want)
				}
			}
			client, arrival := target.Spreads()
			if len(client) != bursts || len(arrival) != bursts {
				t.Errorf("spreads measured for %d (client) and %d (server) bursts, want %d", len(client), len(arrival), bursts)
			}
			// The burst's spread is when its requests left, not when the
			// gate released the workers that started the sending.
			for i := range min(len(client), len(res.Bursts)) {
				if got := res.Bursts[i].Spread; got != client[i] {
					t.Errorf("burst %d: spread %v, want the client-side release spread %v", i, got, client[i])
				}
			}
			notes := strings.Join(target.Notes(), "\n")
			for _, want := range []string{"release: " + string(c.mode), "said success", "actually happened", "server arrival spread"} {
				if !strings.Contains(notes, want) {
					t.Errorf("notes lack %q:\n%s", want, notes)
				}
			}
		})
	}
}

// A check-then-write endpoint with a 100µs window: the wire-level releases
// put the attempts inside the window, and some burst lets two through. (How
// often is the benchmark's business: timing is not asserted here.)
func TestReleaseExposesRace(t *testing.T) {
	for _, c := range []struct {
		mode   httpfire.Release
		server string
	}{{httpfire.LastByte, plainH1}, {httpfire.SinglePacket, h2c}} {
		t.Run(string(c.mode), func(t *testing.T) {
			ctw := httpfiretest.NewCheckThenWrite(100 * time.Microsecond)
			srv := newServer(t, c.server, ctw)
			res, _ := run(t, ctwConfig(srv.URL, c.mode), 8, 40)
			if res.Violations() == 0 {
				t.Errorf("no burst of %d exposed the 100µs check-then-write window (effects %+v)", len(res.Bursts), res.EffectsSummary())
			}
		})
	}
}

// The request each attempt sends is its own: templated by burst and attempt.
func TestTemplatesReachTheServer(t *testing.T) {
	type seen struct{ path, body, header, cookie string }
	got := make(chan seen, 64)
	srv := newServer(t, plainH1, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b strings.Builder
		buf := make([]byte, 256)
		for {
			n, err := r.Body.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		got <- seen{r.URL.RequestURI(), b.String(), r.Header.Get("X-Attempt"), r.Header.Get("Cookie")}
	}))
	cfg := httpfire.Config{
		Method:  "PUT",
		URL:     srv.URL + "/save/{{.Burst}}?token={{.Token}}",
		Headers: []string{"X-Attempt: a{{.Attempt}}"},
		Cookies: []string{"session=abc", "lang=en"},
		Body:    "run={{.RunID}} attempt={{.Attempt}}",
		Release: httpfire.LastByte,
	}
	run(t, cfg, 3, 2)
	close(got)
	tokens := map[string]bool{}
	attempts := map[string]int{}
	for s := range got {
		if !strings.HasPrefix(s.path, "/save/") || !strings.Contains(s.path, "?token=") {
			t.Errorf("path %q", s.path)
		}
		tokens[s.path[strings.Index(s.path, "=")+1:]] = true
		if !strings.Contains(s.body, "attempt=") || strings.TrimPrefix(s.header, "a") != s.body[strings.LastIndex(s.body, "=")+1:] {
			t.Errorf("attempt header %q does not match body %q", s.header, s.body)
		}
		attempts[s.header]++
		if s.cookie != "session=abc; lang=en" {
			t.Errorf("cookie %q", s.cookie)
		}
	}
	if len(tokens) != 2 {
		t.Errorf("tokens %v: want a fresh one per burst", tokens)
	}
	if len(attempts) != 3 || attempts["a0"] != 2 {
		t.Errorf("attempt headers %v: want a0, a1, a2 twice each", attempts)
	}
}

// A setup request creates each burst's subject before the burst, outside
// its timing; a setup that fails stops the run.
func TestSetupRequest(t *testing.T) {
	var mu sync.Mutex
	coupons := map[string]bool{}
	srv := newServer(t, plainH1, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code := r.URL.Query().Get("code")
		mu.Lock()
		defer mu.Unlock()
		switch r.URL.Path {
		case "/coupons":
			if r.Method != "PUT" || code == "bad" {
				http.Error(w, "no", http.StatusBadRequest)
				return
			}
			coupons[code] = true
		case "/redeem":
			if !coupons[code] {
				http.Error(w, "no such coupon", http.StatusNotFound)
				return
			}
			delete(coupons, code)
		}
	}))
	// This server answers a redeemed coupon with 404: say that it means "already done".
	cfg := httpfire.Config{Method: "POST", URL: srv.URL + "/redeem?code={{.Token}}", Setup: "PUT " + srv.URL + "/coupons?code={{.Token}}", Release: httpfire.LastByte,
		Success: httpfire.Success{Declined: []string{"404"}}}
	res, _ := run(t, cfg, 4, 5)
	for _, b := range res.Bursts {
		if b.Outcomes[runner.Executed] != 1 || b.Outcomes[runner.Declined] != 3 {
			t.Errorf("burst %d: outcomes %v, want one redemption of the coupon made for it", b.Index, b.Outcomes)
		}
	}
	cfg.Setup = "PUT " + srv.URL + "/coupons?code=bad"
	target, err := httpfire.New(cfg, params())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := runner.Run(context.Background(), target, runner.Attempts(2), runner.Bursts(1)); err == nil || !strings.Contains(err.Error(), "setup request: PUT") || !strings.Contains(err.Error(), "HTTP 400") {
		t.Errorf("err = %v", err)
	}
}

// auto (the default) asks the server once and chooses single-packet where it
// speaks HTTP/2 — h2c by prior knowledge, h2 by ALPN — and last-byte where it
// does not; the requests then arrive in the protocol chosen, and the notes
// say what was chosen and why.
func TestAutoChoosesByWhatTheServerSpeaks(t *testing.T) {
	for _, c := range []struct {
		server, want, why, proto string
	}{
		{plainH1, "last-byte", "does not speak HTTP/2", "HTTP/1.1"},
		{tlsH1, "last-byte", "TLS handshake chose HTTP/1.1", "HTTP/1.1"},
		{h2c, "single-packet", "negotiated h2c", "HTTP/2.0"},
		{tlsH2, "single-packet", "negotiated h2 (TLS ALPN)", "HTTP/2.0"},
	} {
		t.Run(c.server, func(t *testing.T) {
			ctw := httpfiretest.NewCheckThenWrite(0)
			protos := make(chan string, 100)
			srv := newServer(t, c.server, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method == "PRI" {
					// auto's probe: HTTP/2's preface, which an HTTP/1.1
					// server reads as a request for "*", no resource.
					http.Error(w, "no HTTP/2 here", http.StatusHTTPVersionNotSupported)
					return
				}
				if r.URL.Path != "/count" {
					protos <- r.Proto
				}
				ctw.ServeHTTP(w, r)
			}))
			cfg := ctwConfig(srv.URL, "")
			target, err := httpfire.New(cfg, params())
			if err != nil {
				t.Fatal(err)
			}
			if target.Release() != httpfire.Auto {
				t.Fatalf("default release %q, want auto", target.Release())
			}
			why, err := target.Choose(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if string(target.Release()) != c.want || !strings.Contains(why, c.why) {
				t.Fatalf("auto chose %s (%s), want %s because the server %s", target.Release(), why, c.want, c.why)
			}
			res, err := runner.Run(context.Background(), target, runner.Attempts(4), runner.Bursts(3), runner.Timeout(5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Bursts) != 3 {
				t.Fatalf("%d bursts, want 3", len(res.Bursts))
			}
			close(protos)
			for p := range protos {
				if p != c.proto {
					t.Fatalf("the server saw %s, want %s", p, c.proto)
				}
			}
			notes := strings.Join(target.Notes(), "\n")
			if !strings.Contains(notes, "release: "+c.want) || !strings.Contains(notes, c.why) {
				t.Errorf("notes do not name the mode auto chose and why:\n%s", notes)
			}
		})
	}
}

// A server that cannot be reached is an error from the probe, not a choice.
func TestAutoOnADeadServerIsAConnectError(t *testing.T) {
	srv := newServer(t, plainH1, http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	target, err := httpfire.New(ctwConfig(url, httpfire.Auto), params())
	if err != nil {
		t.Fatal(err)
	}
	_, err = target.Choose(context.Background())
	var ce *httpfire.ConnectError
	if !errors.As(err, &ce) || target.Release() != httpfire.Auto {
		t.Fatalf("Choose on a closed port = %v (release %s), want a ConnectError and no choice", err, target.Release())
	}
}

// auto chose HTTP/2, but a burst larger than the streams the server allows
// at once does not fit on one connection: it falls back to last-byte and
// says why; a burst that fits stays on single-packet.
func TestAutoFallsBackWhenTheBurstExceedsTheStreams(t *testing.T) {
	for _, c := range []struct {
		attempts, replicas int
		want               string
	}{{2, 1, "single-packet"}, {4, 1, "last-byte"}, {6, 2, "last-byte"}} {
		ctw := httpfiretest.NewCheckThenWrite(0)
		srv := httptest.NewUnstartedServer(ctw)
		srv.Config.Protocols = new(http.Protocols)
		srv.Config.Protocols.SetHTTP1(true)
		srv.Config.Protocols.SetUnencryptedHTTP2(true)
		srv.Config.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: 2}
		srv.Start()
		target, err := httpfire.New(ctwConfig(srv.URL, ""), params())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := target.Choose(context.Background()); err != nil {
			t.Fatal(err)
		}
		res, err := runner.Run(context.Background(), target, runner.Attempts(c.attempts), runner.Replicas(c.replicas), runner.Bursts(2), runner.Timeout(5*time.Second))
		srv.Close()
		if err != nil {
			t.Fatal(err)
		}
		notes := strings.Join(target.Notes(), "\n")
		if string(target.Release()) != c.want || !strings.Contains(notes, "release: "+c.want) {
			t.Errorf("%d attempts on a server allowing 2 streams: release %s, want %s; notes:\n%s", c.attempts, target.Release(), c.want, notes)
		}
		// Said once, for a burst's share on one replica (each replica
		// opens its own connections: 3 of 6 on each of 2).
		why := fmt.Sprintf("allows 2 streams at once, fewer than the %d attempts", c.attempts/c.replicas)
		if c.want == "last-byte" && strings.Count(notes, why) != 1 {
			t.Errorf("%d attempts on %d replicas: the fallback does not say why once (%q):\n%s", c.attempts, c.replicas, why, notes)
		}
		if got := res.Outcomes()[runner.Error]; got != 0 {
			t.Errorf("%d attempts: %d errors, %v", c.attempts, got, res.Errors)
		}
	}
}
