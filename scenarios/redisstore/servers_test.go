package redisstore_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// fakeServer speaks just enough RESP for go-redis to connect, and answers
// every other command as the test's handler says: a reply, or silence.
type fakeServer struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	n     int // connections accepted so far
}

// handler answers one command on connection number conn (0 is the first). An
// empty reply means "never answer": the server reads on and stays silent.
type handler func(conn int, args []string) (reply string)

func startFake(t *testing.T, h handler) *fakeServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeServer{ln: ln}
	t.Cleanup(f.close)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			f.mu.Lock()
			f.conns = append(f.conns, c)
			id := f.n
			f.n++
			f.mu.Unlock()
			go f.serve(c, id, h)
		}
	}()
	return f
}

func (f *fakeServer) url() string { return "redis://" + f.ln.Addr().String() + "/0" }

func (f *fakeServer) close() {
	f.ln.Close()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.conns {
		c.Close()
	}
}

func (f *fakeServer) serve(c net.Conn, id int, h handler) {
	r := bufio.NewReader(c)
	silent := false
	for {
		args, err := readCommand(r)
		if err != nil {
			return
		}
		if silent {
			continue
		}
		var reply string
		switch strings.ToUpper(args[0]) {
		case "HELLO":
			// As a server older than Redis 6 does: go-redis falls back to RESP2.
			reply = "-ERR unknown command 'HELLO'\r\n"
		default:
			reply = h(id, args)
		}
		if reply == "" {
			silent = true
			continue
		}
		if _, err := io.WriteString(c, reply); err != nil {
			return
		}
	}
}

func readCommand(r *bufio.Reader) ([]string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(line, "*") {
		return nil, fmt.Errorf("not a RESP array: %q", line)
	}
	n, err := strconv.Atoi(strings.TrimSpace(line[1:]))
	if err != nil {
		return nil, err
	}
	args := make([]string, n)
	for i := range args {
		hdr, err := r.ReadString('\n')
		if err != nil {
			return nil, err
		}
		size, err := strconv.Atoi(strings.TrimSpace(hdr[1:]))
		if err != nil {
			return nil, err
		}
		buf := make([]byte, size+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		args[i] = string(buf[:size])
	}
	return args, nil
}

func bulk(s string) string { return "$" + strconv.Itoa(len(s)) + "\r\n" + s + "\r\n" }

// basics answers what racetest itself sends before a burst.
func basics(args []string) (string, bool) {
	switch strings.ToUpper(args[0]) {
	case "PING":
		return "+PONG\r\n", true
	case "INFO":
		return bulk("# Server\r\nredis_version:0.0.0-fake\r\n"), true
	case "SCRIPT":
		return bulk("0000000000000000000000000000000000000000"), true
	case "SCAN":
		return "*2\r\n$1\r\n0\r\n*0\r\n", true
	}
	// The run's marker (see package runs): registered, refreshed, removed.
	if len(args) > 1 && strings.HasSuffix(args[1], "_run") {
		switch strings.ToUpper(args[0]) {
		case "SET":
			return "+OK\r\n", true
		case "DEL", "PEXPIRE":
			return ":1\r\n", true
		}
	}
	return "", false
}

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
