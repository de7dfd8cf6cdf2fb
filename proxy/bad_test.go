package proxy

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestParseUpstream(t *testing.T) {
	for _, c := range []struct {
		in, proto, addr, service string
	}{
		{"postgres://u:secret@db.example:6543/app?sslmode=disable", "postgres", "db.example:6543", "postgres://u:secret@127.0.0.1:7000/app?sslmode=disable"},
		{"postgresql://u@db/app", "postgres", "db:5432", "postgresql://u@127.0.0.1:7000/app"},
		{"postgres://u@db/app?sslmode=require", "postgres", "db:5432", "postgres://u@127.0.0.1:7000/app?sslmode=disable"},
		{"mysql://root:pw@db:3307/shop", "mysql", "db:3307", "mysql://root:pw@127.0.0.1:7000/shop"},
		{"mariadb://root@db/shop?tls=true", "mysql", "db:3306", "mariadb://root@127.0.0.1:7000/shop?tls=false"},
		{"root:pw@tcp(db:3306)/shop?parseTime=true", "mysql", "db:3306", "root:pw@tcp(127.0.0.1:7000)/shop?parseTime=true"},
		{"app@tcp(10.0.0.5:3306)/shop?tls=skip-verify&x=1", "mysql", "10.0.0.5:3306", "app@tcp(127.0.0.1:7000)/shop?tls=false&x=1"},
	} {
		u, err := ParseUpstream(c.in)
		if err != nil {
			t.Errorf("ParseUpstream(%q): %v", c.in, err)
			continue
		}
		if string(u.Protocol) != c.proto || u.Addr != c.addr {
			t.Errorf("ParseUpstream(%q) = %s %s, want %s %s", c.in, u.Protocol, u.Addr, c.proto, c.addr)
		}
		if got := u.Rewrite("127.0.0.1:7000"); got != c.service {
			t.Errorf("Rewrite of %q:\n got %s\nwant %s", c.in, got, c.service)
		}
	}
	for _, c := range []struct{ in, says string }{
		{"", "no upstream"},
		{"redis://:secret@localhost:6379", `unknown scheme "redis"`},
		{"mongodb://u:secret@h/db", `unknown scheme "mongodb"`},
		{"host=localhost user=postgres password=secret", "nor a MySQL DSN"},
		{"postgres://u:secret@a,b/db", "one host"},
		{"mysql://root:secret@db:3306/", "no database"},
		{"root:secret@tcp(db:3306)", "database name"},
	} {
		_, err := ParseUpstream(c.in)
		var se *SchemeError
		if !errors.As(err, &se) {
			t.Errorf("ParseUpstream(%q): %v, want a *SchemeError", c.in, err)
			continue
		}
		if !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), "postgres://") {
			t.Errorf("ParseUpstream(%q): %q, want it to say %q and list the schemes", c.in, err, c.says)
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("ParseUpstream(%q): %q shows the password", c.in, err)
		}
	}
}

func TestStartUpstreamDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	_, err = Start(context.Background(), Config{Upstream: "postgres://u:secret@" + addr + "/db"})
	var ue *UpstreamError
	if !errors.As(err, &ue) || ue.Addr != addr || !strings.Contains(err.Error(), addr) {
		t.Fatalf("Start with the upstream down: %v; want an *UpstreamError naming %s", err, addr)
	}
	if strings.Contains(err.Error(), "secret") {
		t.Errorf("the error shows the password: %v", err)
	}
}

// fakeUpstream accepts connections and closes them: enough for Start.
func fakeUpstream(t *testing.T) string {
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
			c.Close()
		}
	}()
	return ln.Addr().String()
}

func TestControlAPI(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := Start(ctx, Config{Upstream: "postgres://u@" + fakeUpstream(t) + "/db", NoLockTables: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := Dial(ctx, p.ControlAddr())
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	if c.Info.Protocol != Postgres || c.Info.Listen != p.Addr() {
		t.Errorf("info: %+v", c.Info)
	}
	if _, err := c.Begin(ctx, BurstSpec{Attempts: 0}); err == nil || !strings.Contains(err.Error(), "at least 1") {
		t.Errorf("Begin with 0 attempts: %v", err)
	}
	if _, err := c.Begin(ctx, BurstSpec{Attempts: 2, Timeout: -time.Second}); err == nil || !strings.Contains(err.Error(), "negative") {
		t.Errorf("Begin with a negative timeout: %v", err)
	}
	id, err := c.Begin(ctx, BurstSpec{Attempts: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Begin(ctx, BurstSpec{Attempts: 2}); !errors.Is(err, ErrBurstActive) {
		t.Errorf("a second Begin: %v, want ErrBurstActive", err)
	}
	if err := c.Done(ctx, id+1); err == nil {
		t.Error("Done of a burst that is not active succeeded")
	}
	if err := c.Done(ctx, id); err != nil {
		t.Errorf("Done: %v", err)
	}
	if _, err := c.End(ctx, id+1); err == nil || !strings.Contains(err.Error(), "no such burst") {
		t.Errorf("End of another burst: %v", err)
	}
	a, err := c.End(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if a.Burst != id || a.Attempts != 2 || a.Finished != 1 || !a.NoStatement || !a.Untested {
		t.Errorf("account over the API: %+v", a)
	}
	if _, err := c.End(ctx, id); err == nil {
		t.Error("a second End succeeded")
	}
	resp, err := http.Post("http://"+p.ControlAddr()+"/bursts", "application/json", strings.NewReader(`{"attempts": "two"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a malformed burst: %s, want 400", resp.Status)
	}
	if _, err := p.Begin(BurstSpec{Attempts: 1}); err != nil {
		t.Fatal(err)
	}
	p.Close()
	if _, err := p.Begin(BurstSpec{Attempts: 1}); err == nil {
		t.Error("Begin after Close succeeded")
	}
}

func TestDialNotAProxy(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"service": "something else"}`))
	}))
	defer web.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	for _, addr := range []string{strings.TrimPrefix(web.URL, "http://"), web.URL, closed, "not an address", fakeUpstream(t)} {
		_, err := Dial(ctx, addr)
		var ne *NotProxyError
		if !errors.As(err, &ne) || !strings.Contains(err.Error(), "not a racetest proxy") {
			t.Errorf("Dial(%q): %v, want a *NotProxyError", addr, err)
		}
	}
}
