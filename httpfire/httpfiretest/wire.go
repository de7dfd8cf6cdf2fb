package httpfiretest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/racetest/racetest/httpfire"
)

// WireServer is a bare HTTP/1.1 server around a CheckThenWrite, for
// measuring when requests reach the server rather than when a full HTTP
// stack gets round to them: each connection's goroutine reads the request
// and timestamps it the moment its last byte is read, with no routing,
// header maps or allocations in between. It speaks just enough HTTP/1.1 for
// racetest's requests (Content-Length bodies, keep-alive).
type WireServer struct {
	C   *CheckThenWrite
	URL string
	ln  net.Listener
	wg  sync.WaitGroup
}

// NewWireServer listens on a loopback port and serves c.
func NewWireServer(c *CheckThenWrite) (*WireServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &WireServer{C: c, URL: "http://" + ln.Addr().String(), ln: ln}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Close stops the server and waits for its connections to end.
func (s *WireServer) Close() {
	s.ln.Close()
	s.wg.Wait()
}

func (s *WireServer) accept() {
	defer s.wg.Done()
	var conns []net.Conn
	var mu sync.Mutex
	defer func() {
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	}()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
		s.wg.Add(1)
		go s.serve(c)
	}
}

func (s *WireServer) serve(c net.Conn) {
	defer s.wg.Done()
	defer c.Close()
	br := bufio.NewReaderSize(c, 8<<10)
	for {
		target, length, err := readHead(br)
		if err != nil {
			return
		}
		if _, err := io.CopyN(io.Discard, br, int64(length)); err != nil {
			return
		}
		now := time.Now()
		u, _ := url.ParseRequestURI(target)
		key := ""
		if u != nil {
			key = u.Query().Get("key")
		}
		if u != nil && u.Path == "/count" {
			writeResponse(c, 200, strconv.Itoa(s.C.Writes(key)), now)
			continue
		}
		ok := s.C.check(key, now)
		time.Sleep(s.C.Window + s.C.Tail)
		if ok {
			writeResponse(c, 200, "written", now)
		} else {
			writeResponse(c, 409, "already written", now)
		}
	}
}

// readHead reads a request's head and returns its target and body length.
func readHead(br *bufio.Reader) (target string, length int, err error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return "", 0, err
	}
	parts := strings.Fields(string(line))
	if len(parts) != 3 {
		return "", 0, fmt.Errorf("bad request line %q", line)
	}
	target = parts[1]
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return "", 0, err
		}
		if len(bytes.TrimSpace(line)) == 0 {
			return target, length, nil
		}
		if name, value, ok := bytes.Cut(line, []byte(":")); ok && bytes.EqualFold(bytes.TrimSpace(name), []byte("Content-Length")) {
			if length, err = strconv.Atoi(string(bytes.TrimSpace(value))); err != nil {
				return "", 0, err
			}
		}
	}
}

func writeResponse(c net.Conn, code int, body string, arrival time.Time) {
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Length: %d\r\n%s: %d\r\n\r\n%s",
		code, map[int]string{200: "OK", 409: "Conflict"}[code], len(body), httpfire.ArrivalHeader, arrival.UnixNano(), body)
}
