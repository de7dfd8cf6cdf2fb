package pgstore

import (
	"bytes"
	"context"
	"net"
	"sync"
	"testing"

	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
)

// wireLog records every Write on the connections it dials, per connection.
type wireLog struct {
	mu     sync.Mutex
	writes map[net.Conn][][]byte
}

type loggedConn struct {
	net.Conn
	log *wireLog
}

func (c loggedConn) Write(b []byte) (int, error) {
	c.log.mu.Lock()
	c.log.writes[c] = append(c.log.writes[c], bytes.Clone(b))
	c.log.mu.Unlock()
	return c.Conn.Write(b)
}

func (l *wireLog) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return loggedConn{c, l}, nil
}

// sync is the extended protocol's Sync message: the end of a request.
var syncMsg = []byte{'S', 0, 0, 0, 4}

// Each attempt's first request goes out in one write, with no hidden
// round trip before it (no statement prepare or describe): what a
// last-byte release will hold back is the attempt's own first statement.
// The later steps are one write each, so the count of writes is the count
// of round trips.
func TestFirstStepIsOneWrite(t *testing.T) {
	base := serverParams(t)
	for _, c := range []struct {
		scenario, first string
		writes          int
	}{
		{scenarios.MemorySet, "INSERT INTO", 1},
		{scenarios.CheckThenWrite, "SELECT id FROM", 3}, // BEGIN+SELECT, INSERT, COMMIT
		{scenarios.ConditionalUpdate, "UPDATE", 1},
		{scenarios.UniqueInsert, "INSERT INTO", 1},
		{scenarios.TTLLease, "WITH taken AS", 1},
	} {
		t.Run(c.scenario, func(t *testing.T) {
			log := &wireLog{writes: map[net.Conn][][]byte{}}
			p := base
			p.RunID = scenarios.NewRunID()
			p.Dial = log.dial
			tg := build(t, c.scenario, p)
			ctx := context.Background()
			if err := tg.Prepare(ctx); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = tg.Cleanup(context.Background()) })
			app, _ := tg.Open(ctx, 0, 1)
			sess, err := app.Session(ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer sess.Close()
			subj, err := tg.Reset(ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			conn := sess.(*session).c.PgConn().Conn()
			log.mu.Lock()
			log.writes[conn] = nil
			log.mu.Unlock()
			if o := sess.Attempt(ctx, subj, &runner.Worker{}); o.Class != runner.Executed {
				t.Fatalf("attempt: %s %v", o.Class, o.Err)
			}
			log.mu.Lock()
			ws := log.writes[conn]
			log.mu.Unlock()
			if len(ws) != c.writes {
				t.Errorf("%d writes, want %d (one per round trip)", len(ws), c.writes)
			}
			if len(ws) == 0 {
				return
			}
			if !bytes.Contains(ws[0], []byte(c.first)) || !bytes.HasSuffix(ws[0], syncMsg) {
				t.Errorf("first write is not the whole first request (%q ... Sync): %q", c.first, ws[0])
			}
			if n := bytes.Count(ws[0], syncMsg); n != 1 {
				t.Errorf("first write holds %d Syncs, want 1", n)
			}
		})
	}
}
