package builtin

import (
	"testing"

	"github.com/racetest/racetest/scenarios"
)

// A suite's connections: keys are each connection's Key: the write
// endpoint is the backend's name, its replica the name with _read
// (AddBackend holds a backend to it). Two backends never share a key.
func TestConnectionKeysAreTheBackendNames(t *testing.T) {
	seen := map[string]string{}
	for _, b := range Registry().Backends() {
		for _, c := range []struct {
			conn *scenarios.Connection
			want string
		}{{b.Conn, b.Name}, {b.ReadConn, b.Name + scenarios.ReadSuffix}} {
			if c.conn == nil {
				continue
			}
			if got := c.conn.Key; got != c.want {
				t.Errorf("%s: --%s is written %q in a suite, want %q", b.Name, c.conn.Flag, got, c.want)
			}
			if prev, dup := seen[c.want]; dup {
				t.Errorf("%s: key %s is taken by --%s too", b.Name, c.want, prev)
			}
			seen[c.want] = c.conn.Flag
		}
	}
	if len(seen) < 7 {
		t.Fatalf("want the 4 server backends and 3 read endpoints, got %v", seen)
	}
}

// A server backend says what its runs leave there and how 'racetest clean'
// finds it; the embedded one neither (cmd reads both from the Backend).
func TestServerBackendsAreCleaned(t *testing.T) {
	for _, b := range Registry().Backends() {
		if (b.Janitor != nil) != b.Server || (b.Kept != "") != b.Server {
			t.Errorf("%s: server %v, janitor %v, kept %q", b.Name, b.Server, b.Janitor != nil, b.Kept)
		}
	}
}
