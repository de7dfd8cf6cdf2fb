package httpfire

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/racetest/racetest/scenarios"
)

// A round waits probeFactor × the request alone, never under probeFloor,
// never over probeCeiling, and never past half the timeout.
func TestRoundWait(t *testing.T) {
	for _, c := range []struct {
		solo, timeout, want time.Duration
	}{
		{time.Millisecond, 30 * time.Second, probeFloor},                   // 20 ms: the floor
		{100 * time.Millisecond, 30 * time.Second, 2 * time.Second},        // 20 × 100 ms
		{time.Second, 30 * time.Second, probeCeiling},                      // 20 s: the ceiling
		{100 * time.Millisecond, 3 * time.Second, 1500 * time.Millisecond}, // half the timeout
		{100 * time.Millisecond, 1 * time.Second, 500 * time.Millisecond},  // under the floor, still half the timeout
	} {
		if got := roundWait(c.solo, c.timeout); got != c.want {
			t.Errorf("roundWait(%s, %s) = %s, want %s", c.solo, c.timeout, got, c.want)
		}
	}
}

// Only an answer on a later try says that the first try waited in vain.
func TestBesideDetailNamesALaterTry(t *testing.T) {
	first := besideDetail(3*time.Millisecond, time.Millisecond, 0, time.Second)
	if strings.Contains(first, "on try") || !strings.Contains(first, "it serves requests concurrently") {
		t.Errorf("first try: %q", first)
	}
	second := besideDetail(3*time.Millisecond, time.Millisecond, 1, time.Second)
	if !strings.HasSuffix(second, " (on try 2; try 1 waited 1.00s in vain)") {
		t.Errorf("second try: %q", second)
	}
}

// A server that accepts the probe's connection and never answers is "no
// response within" the timeout, not the socket's own error.
func TestProbeAloneOfASilentServer(t *testing.T) {
	ln := listen(t, func(c net.Conn) { t.Cleanup(func() { c.Close() }) }) // held open, unanswered
	target, err := New(Config{Method: "POST", URL: "http://" + ln.Addr().String() + "/", Timeout: 300 * time.Millisecond}, scenarios.Params{RunID: scenarios.NewRunID()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := target.probeAlone(context.Background()); err == nil || err.Error() != "no response within 300ms" {
		t.Errorf("probe of a silent server: %v, want no response within 300ms", err)
	}
}

// A server that closes the connection answered nothing either, but that is
// its error, not a time-out.
func TestProbeAloneOfAServerThatHangsUp(t *testing.T) {
	ln := listen(t, func(c net.Conn) { c.Close() })
	target, err := New(Config{Method: "POST", URL: "http://" + ln.Addr().String() + "/", Timeout: 5 * time.Second}, scenarios.Params{RunID: scenarios.NewRunID()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := target.probeAlone(context.Background()); err == nil || strings.Contains(err.Error(), "no response within") {
		t.Errorf("probe of a server that hangs up: %v, want its own error", err)
	}
}

// listen accepts connections on a free port of the loopback and hands
// each to serve, until the test ends.
func listen(t *testing.T, serve func(net.Conn)) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			serve(c)
		}
	}()
	return ln
}
