package cmd

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// fakeClusterNode speaks just enough RESP for go-redis to connect, and
// says it is a Redis Cluster node (INFO cluster: cluster_enabled:1), as a
// node of a real cluster named by a plain redis:// URL does.
func fakeClusterNode(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	bulk := func(s string) string { return "$" + strconv.Itoa(len(s)) + "\r\n" + s + "\r\n" }
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go func() {
				r := bufio.NewReader(c)
				for {
					args, err := readRESP(r)
					if err != nil {
						return
					}
					reply := "+OK\r\n" // CLIENT SETINFO and the like
					switch strings.ToUpper(args[0]) {
					case "HELLO": // as Redis before 6: go-redis falls back to RESP2
						reply = "-ERR unknown command 'HELLO'\r\n"
					case "PING":
						reply = "+PONG\r\n"
					case "INFO":
						reply = bulk("# Cluster\r\ncluster_enabled:1\r\n")
					case "SCAN":
						reply = "*2\r\n$1\r\n0\r\n*0\r\n"
					}
					if _, err := io.WriteString(c, reply); err != nil {
						return
					}
				}
			}()
		}
	}()
	return "redis://" + ln.Addr().String() + "/0"
}

func readRESP(r *bufio.Reader) ([]string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "*")))
	if err != nil || n < 1 {
		return nil, io.ErrUnexpectedEOF
	}
	args := make([]string, n)
	for i := range args {
		hdr, err := r.ReadString('\n')
		if err != nil {
			return nil, err
		}
		size, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(hdr, "$")))
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

// --effects auto:redis reads the keys of one server (SCAN): on a Redis
// Cluster it would see the keys of one node only, and call a race that
// wrote elsewhere SAFE. A cluster is refused with exit 2, whether its URL
// names its seeds or a plain redis:// URL names one of its nodes, as the
// effects check redis:CMD refuses it (docs/clusters.md).
func TestEffectsAutoRedisRefusesACluster(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	for name, url := range map[string]string{
		"seeds": "redis://127.0.0.1:1?addr=127.0.0.1:2",
		"node":  fakeClusterNode(t),
	} {
		t.Run(name, func(t *testing.T) {
			_, stderr, code := execCmd(t, false, "http", "POST", srv.URL+"/?c={{.Token}}", "--effects", "auto:redis", "--watch", "k:*",
				"--redis-url", url, "-n", "2", "--bursts", "2")
			if code != ExitUsage || !strings.Contains(stderr, "--effects auto:redis (racetest http) does not run on a Redis Cluster yet; point --redis-url at a single server") {
				t.Errorf("auto:redis on a cluster (%s): exit %d, want %d and the refusal\n%s", url, code, ExitUsage, stderr)
			}
		})
	}
}
