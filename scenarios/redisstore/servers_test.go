package redisstore_test

import (
	"io"
	"net"
	"sync"
	"testing"

	"github.com/racetest/racetest/internal/fakeredis"
)

// The fake Redis server of these tests: internal/fakeredis.
type handler = fakeredis.Handler

func startFake(t *testing.T, h handler) *fakeredis.Server { return fakeredis.Start(t, h) }

var (
	bulk   = fakeredis.Bulk
	basics = fakeredis.Basics
)

// proxy forwards TCP to a real server until kill, which drops every
// connection at once, as a server that dies would.
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	dead   bool
}

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target}
	t.Cleanup(p.kill)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			if p.dead {
				c.Close()
				up.Close()
			}
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { io.Copy(up, c); up.Close() }()
			go func() { io.Copy(c, up); c.Close() }()
		}
	}()
	return p
}

func (p *proxy) kill() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dead = true
	for _, c := range p.conns {
		c.Close()
	}
}
