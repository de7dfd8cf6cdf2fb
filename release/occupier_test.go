package release

import (
	"io"
	"net"
	"sync/atomic"
	"testing"
)

// The occupier of a server gets one batch of PINGs per wave, however many
// of the parked requests go to that server, and stays open while any of
// the run's connections to it is (issue 27: each lived in a whole run of
// release).
func TestOccupierPerServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var got atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { n, _ := io.Copy(io.Discard, c); got.Add(n) }()
		}
	}()
	w := NewWire("redis", 0)
	dest := "tcp " + ln.Addr().String()
	w.dialled(dest)
	w.dialled(dest)
	if !waitFor(func() bool {
		w.occMu.Lock()
		defer w.occMu.Unlock()
		return w.occs[dest] != nil && w.occs[dest].c != nil
	}) {
		t.Fatal("the occupier never connected")
	}
	w.occupyAll([]*park{{c: &conn{dest: dest}}, {c: &conn{dest: dest}}})
	// Close the occupier to count what it wrote: one batch, not one per
	// parked request.
	w.closed()
	w.occMu.Lock()
	open := w.occs != nil
	w.occMu.Unlock()
	if !open {
		t.Fatal("one of the run's two connections closed, and the occupier with it")
	}
	w.closed()
	w.occMu.Lock()
	open = w.occs != nil
	w.occMu.Unlock()
	if open {
		t.Fatal("both of the run's connections closed, and the occupier is still open")
	}
	// The server adds what it read once, at the connection's end.
	want := int64(len(w.occupy))
	if !waitFor(func() bool { return got.Load() > 0 }) {
		t.Fatalf("the server got nothing, want %d bytes of PINGs", want)
	}
	if got.Load() != want {
		t.Errorf("the server got %d bytes of PINGs for two requests to it, want one batch (%d)", got.Load(), want)
	}
}
