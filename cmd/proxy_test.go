package cmd

import (
	"context"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/racetest/racetest/proxy"
)

func TestProxyFlagsParse(t *testing.T) {
	f := &factory{IO: func() *ioStreams { io, _, _ := testStreams(); return io }(), Registry: memoryOnly()}
	var got *proxyOptions
	c := newCmdProxy(f, func(_ context.Context, o *proxyOptions) error { got = o; return nil })
	c.SetArgs([]string{"--upstream", "postgres://u@h/db", "--listen", ":6432", "--control", "127.0.0.1:7070", "--settle", "250ms"})
	if err := c.Execute(); err != nil {
		t.Fatal(err)
	}
	if got.Upstream != "postgres://u@h/db" || got.Listen != ":6432" || got.Control != "127.0.0.1:7070" || got.Settle != 250*time.Millisecond {
		t.Errorf("parsed options = %+v", got)
	}
}

// closedAddr is an address where nothing listens.
func closedAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestProxyBadInput(t *testing.T) {
	down := closedAddr(t)
	for _, c := range []struct {
		args []string
		code int
		says []string
	}{
		{[]string{"proxy"}, exitUsage, []string{"--upstream is required"}},
		{[]string{"proxy", "--upstream", "redis://:pw@localhost:6379"}, exitUsage, []string{`unknown scheme "redis"`, "postgres://", "mysql://"}},
		{[]string{"proxy", "--upstream", "postgres://u@h/db", "--listen", "nonsense"}, exitUsage, []string{"--listen", "HOST:PORT"}},
		{[]string{"proxy", "--upstream", "postgres://u@h/db", "--control", "h:port"}, exitUsage, []string{"--control", "not a port"}},
		{[]string{"proxy", "--upstream", "postgres://u@h/db", "--settle", "-1s"}, exitUsage, []string{"--settle cannot be negative"}},
		{[]string{"proxy", "--upstream", "postgres://u:secret@" + down + "/db"}, exitSetup, []string{down, "is it running"}},
		{[]string{"proxy", "--upstream", "root:secret@tcp(" + down + ")/db"}, exitSetup, []string{down, "mysql"}},
	} {
		_, errOut, code := execCmd(t, false, c.args...)
		if code != c.code {
			t.Errorf("%q: exit %d, want %d: %s", c.args, code, c.code, errOut)
		}
		for _, s := range c.says {
			if !strings.Contains(errOut, s) {
				t.Errorf("%q: stderr %q lacks %q", c.args, errOut, s)
			}
		}
		if strings.Contains(errOut, "secret") {
			t.Errorf("%q: stderr shows the password: %s", c.args, errOut)
		}
	}
}

// The proxy prints the service's URL (password hidden) and its control
// address, answers as a proxy there, and stops cleanly when interrupted.
func TestProxyRunsAndStops(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	io, _, _ := testStreams()
	out := &syncBuffer{}
	io.Out = out
	f := &factory{IO: io, Registry: memoryOnly()}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- runProxy(ctx, &proxyOptions{factory: f, Upstream: "postgres://app:secret@" + ln.Addr().String() + "/shop?sslmode=disable",
			Listen: "127.0.0.1:0", Control: "127.0.0.1:0", Settle: proxy.DefaultSettle})
	}()
	var m []string
	for deadline := time.Now().Add(20 * time.Second); m == nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no addresses printed: %q", out.String())
		}
		m = regexp.MustCompile(`service URL: postgres://app:xxxxx@(127\.0\.0\.1:\d+)/shop\?sslmode=disable\ncontrol: +(\S+)\n`).FindStringSubmatch(out.String())
	}
	if strings.Contains(out.String(), "secret") {
		t.Errorf("the output shows the password:\n%s", out)
	}
	c, err := proxy.Dial(ctx, m[2])
	if err != nil {
		t.Fatalf("the printed control address: %v", err)
	}
	if c.Info.Listen != m[1] || c.Info.Protocol != proxy.Postgres {
		t.Errorf("the proxy says %+v; printed %s", c.Info, m[1])
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("stopping: %v, want a clean stop", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the proxy did not stop when interrupted")
	}
}
