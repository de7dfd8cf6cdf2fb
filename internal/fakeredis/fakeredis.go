// Package fakeredis is a Redis server for tests: it speaks just enough RESP
// for go-redis to connect, and answers every other command as the test
// says. The backend's tests and the command line's share it.
package fakeredis

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

// Server speaks just enough RESP for go-redis to connect, and answers
// every other command as the test's handler says: a reply, or silence.
type Server struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	n     int // connections accepted so far
}

// Handler answers one command on connection number conn (0 is the first). An
// empty reply means "never answer": the server reads on and stays silent.
type Handler func(conn int, args []string) (reply string)

// Start serves h on a port of its own until the test ends.
func Start(t testing.TB, h Handler) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &Server{ln: ln}
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

// Addr is the server's host:port.
func (f *Server) Addr() string { return f.ln.Addr().String() }

// URL is the server's redis:// URL, database 0.
func (f *Server) URL() string { return "redis://" + f.ln.Addr().String() + "/0" }

func (f *Server) close() {
	f.ln.Close()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.conns {
		c.Close()
	}
}

func (f *Server) serve(c net.Conn, id int, h Handler) {
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

// readCommand reads one RESP array of bulk strings.
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

// Bulk is s as a RESP bulk string.
func Bulk(s string) string { return "$" + strconv.Itoa(len(s)) + "\r\n" + s + "\r\n" }

// Basics answers what racetest itself sends before a burst, and false
// for anything else.
func Basics(args []string) (string, bool) {
	switch strings.ToUpper(args[0]) {
	case "PING":
		return "+PONG\r\n", true
	case "INFO":
		return Bulk("# Server\r\nredis_version:0.0.0-fake\r\n"), true
	case "SCRIPT":
		return Bulk("0000000000000000000000000000000000000000"), true
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
