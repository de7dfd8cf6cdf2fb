package httpfire_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/racetest/racetest/httpfire"
	"github.com/racetest/racetest/runner"
)

// runErr runs two bursts and returns the error the run stopped with.
func runErr(t *testing.T, cfg httpfire.Config) error {
	t.Helper()
	target, err := httpfire.New(cfg, params())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = runner.Run(ctx, target, runner.Attempts(3), runner.Bursts(2), runner.Timeout(2*time.Second))
	return err
}

func wantConnectError(t *testing.T, err error, words ...string) {
	t.Helper()
	var ce *httpfire.ConnectError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want a ConnectError", err)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%q does not say %q", err, w)
		}
	}
}

func TestUnreachableTargets(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := ln.Addr().String()
	ln.Close()
	t.Run("refused", func(t *testing.T) {
		wantConnectError(t, runErr(t, httpfire.Config{URL: "http://" + refused + "/"}), "connection refused", "is the server running")
	})
	t.Run("unknown host", func(t *testing.T) {
		wantConnectError(t, runErr(t, httpfire.Config{URL: "http://no-such-host.invalid/", Timeout: 3 * time.Second}), "cannot resolve no-such-host.invalid")
	})
	t.Run("untrusted certificate", func(t *testing.T) {
		srv := newServer(t, tlsH2, http.NotFoundHandler())
		wantConnectError(t, runErr(t, httpfire.Config{URL: srv.URL + "/"}), "TLS handshake", "--insecure")
	})
	t.Run("TLS to a plain server", func(t *testing.T) {
		srv := newServer(t, plainH1, http.NotFoundHandler())
		wantConnectError(t, runErr(t, httpfire.Config{URL: strings.Replace(srv.URL, "http://", "https://", 1) + "/"}), "does not speak TLS")
	})
}

// Asked for single-packet, a server that speaks only HTTP/1.1 gets a clear
// refusal — over TLS (ALPN) and over cleartext (h2c prior knowledge).
func TestSinglePacketNeedsHTTP2(t *testing.T) {
	for _, kind := range []string{plainH1, tlsH1} {
		t.Run(kind, func(t *testing.T) {
			srv := newServer(t, kind, http.NotFoundHandler())
			err := runErr(t, httpfire.Config{URL: srv.URL + "/", Release: httpfire.SinglePacket, Insecure: true})
			wantConnectError(t, err, "HTTP/1.1 only", "--release last-byte")
		})
	}
}

// A server that drops some connections mid-burst, after the request went
// out: those attempts are unknown (they may have run), and without an
// effects check the run cannot be SAFE.
func TestServerClosesMidBurst(t *testing.T) {
	var n atomic.Int64
	srv := newServer(t, plainH1, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1)%3 == 0 {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		w.WriteHeader(http.StatusConflict)
	}))
	for _, mode := range []httpfire.Release{httpfire.Barrier, httpfire.LastByte} {
		t.Run(string(mode), func(t *testing.T) {
			target, err := httpfire.New(httpfire.Config{URL: srv.URL + "/", Method: "POST", Release: mode}, params())
			if err != nil {
				t.Fatal(err)
			}
			res, err := runner.Run(context.Background(), target, runner.Attempts(3), runner.Bursts(6), runner.Timeout(2*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			out := res.Outcomes()
			if out[runner.Unknown] == 0 || out[runner.Executed] != 0 {
				t.Errorf("outcomes %v: the dropped requests must be unknown, none executed", out)
			}
			checks := target.Checks(context.Background())
			if len(checks) != 1 || checks[0].OK || !strings.Contains(checks[0].Detail, "claims nothing") {
				t.Errorf("checks %+v: want a failed check that refuses a verdict", checks)
			}
		})
	}
}

// A server that answers nothing at all ends the run with an error, never
// with a verdict.
func TestServerAnswersNothing(t *testing.T) {
	srv := newServer(t, plainH1, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
			conn.Close()
		}
	}))
	err := runErr(t, httpfire.Config{URL: srv.URL + "/", Release: httpfire.LastByte})
	if err == nil || !strings.Contains(err.Error(), "none of the 3 requests got an HTTP response") {
		t.Fatalf("err = %v", err)
	}
}

// A request that never gets an answer counts as unknown when it times out,
// and does not hang the run.
func TestTimeoutIsUnknown(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	srv := newServer(t, h2c, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/count" {
			w.Write([]byte("0")) // the effects check, read before the burst too
			return
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	for _, mode := range []httpfire.Release{httpfire.LastByte, httpfire.SinglePacket} {
		t.Run(string(mode), func(t *testing.T) {
			target, err := httpfire.New(httpfire.Config{URL: srv.URL + "/", Release: mode, Effects: "http:" + srv.URL + "/count"}, params())
			if err != nil {
				t.Fatal(err)
			}
			res, err := runner.Run(context.Background(), target, runner.Attempts(2), runner.Bursts(1), runner.Timeout(200*time.Millisecond))
			if err == nil || !strings.Contains(err.Error(), "none of the 2 requests") {
				t.Fatalf("err = %v (result %+v)", err, res)
			}
			if n := res.Errors["no response in time: attempt timed out"]; n != 2 {
				t.Errorf("errors %v: want both attempts unknown after the timeout", res.Errors)
			}
		})
	}
}

// A body named as a device, a pipe or a file past MaxBodySize is refused
// at once, before any request (issue 29: -d @/dev/zero read 2.7 GB in 10 s).
func TestBodyFileIsBounded(t *testing.T) {
	for _, file := range []string{"/dev/zero", t.TempDir()} {
		_, err := httpfire.New(httpfire.Config{URL: "http://127.0.0.1:9/x", BodyFile: file}, params())
		if err == nil || !strings.Contains(err.Error(), "not a regular file") && !strings.Contains(err.Error(), "a directory") {
			t.Errorf("body from %s: %v", file, err)
		}
	}
}
