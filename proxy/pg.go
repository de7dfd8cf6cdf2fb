package proxy

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// PostgreSQL's wire protocol: after an untyped startup message, every
// message is a type byte and a big-endian length that counts itself.
// Each message is read whole and relayed as read; pgproto3 decodes the
// bodies the proxy needs (Query, Parse, Bind, Execute, BackendKeyData).

const (
	pgSSLRequest    = 80877103
	pgGSSEncRequest = 80877104
	pgCancelRequest = 80877102
	// pgMaxMessage bounds a message the proxy buffers whole (the server's
	// own limit is 1 GB; a client is not expected to come near).
	pgMaxMessage = 1 << 30
)

// pgFromClient relays the client's messages, answering a request for
// TLS or GSS encryption with 'N' (the proxy speaks plaintext) and
// holding a burst's statement where it must.
func (c *conn) pgFromClient() error {
	br := bufio.NewReaderSize(c.client, 32<<10)
	for {
		var hdr [4]byte
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return err
		}
		n := int(binary.BigEndian.Uint32(hdr[:]))
		if n < 8 || n > 10<<10 {
			return fmt.Errorf("proxy: bad startup message length %d", n)
		}
		raw := make([]byte, n)
		copy(raw, hdr[:])
		if _, err := io.ReadFull(br, raw[4:]); err != nil {
			return err
		}
		code := binary.BigEndian.Uint32(raw[4:8])
		if code == pgSSLRequest || code == pgGSSEncRequest {
			if _, err := c.client.Write([]byte{'N'}); err != nil {
				return err
			}
			continue
		}
		if err := c.sendServer(raw, true); err != nil {
			return err
		}
		if code == pgCancelRequest {
			_, err := io.Copy(io.Discard, br) // the server closes the connection
			return err
		}
		break
	}
	for {
		raw, err := pgRead(br)
		if err != nil {
			return err
		}
		st := c.pgStatement(raw)
		if err := c.forward(raw, st, br.Buffered() > 0); err != nil {
			return err
		}
	}
}

// pgRead reads one typed message whole.
func pgRead(br *bufio.Reader) ([]byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(hdr[1:]))
	if n < 4 || n > pgMaxMessage {
		return nil, fmt.Errorf("proxy: bad message length %d for %q", n, hdr[0])
	}
	raw := make([]byte, 1+n)
	copy(raw, hdr[:])
	if _, err := io.ReadFull(br, raw[5:]); err != nil {
		return nil, err
	}
	return raw, nil
}

// pgStatement reads what a client message runs: a simple Query, an
// Execute of a portal (whose statement a Bind named and a Parse gave
// text), a FunctionCall. It keeps the names of prepared statements and
// portals, and notes a Sync as wanting an answer. nil: the message runs
// nothing.
func (c *conn) pgStatement(raw []byte) *statement {
	body := raw[5:]
	due := func() { c.due++ }
	switch raw[0] {
	case 'Q':
		var m pgproto3.Query
		if m.Decode(body) != nil {
			return &statement{text: "(unreadable query)", write: true, mark: due}
		}
		return &statement{text: m.String, write: WritesOrLocks(m.String, c.p.dialect), mark: due}
	case 'P':
		var m pgproto3.Parse
		if m.Decode(body) == nil {
			c.pgStmts[m.Name] = m.Query
		}
		// Parsing opens the tables: it may wait on a lock as well.
		c.p.mu.Lock()
		c.p.joinLocked(c)
		c.p.mu.Unlock()
	case 'B':
		var m pgproto3.Bind
		if m.Decode(body) == nil {
			text, ok := c.pgStmts[m.PreparedStatement]
			if !ok {
				text = "(unknown prepared statement " + m.PreparedStatement + ")"
			}
			c.pgPortals[m.DestinationPortal] = text
		}
	case 'C':
		if len(body) > 1 {
			name := string(body[1 : len(body)-1])
			if body[0] == 'S' {
				delete(c.pgStmts, name)
			} else {
				delete(c.pgPortals, name)
			}
		}
	case 'E':
		// An unknown portal reads as "(unknown …)", which counts as a write.
		var m pgproto3.Execute
		text := "(unknown portal)"
		if m.Decode(body) == nil {
			if t, ok := c.pgPortals[m.Portal]; ok {
				text = t
			}
		}
		return &statement{text: text, write: WritesOrLocks(text, c.p.dialect), mark: func() { c.execDue++ }}
	case 'F':
		return &statement{text: "(function call)", write: true, mark: func() { c.execDue++ }}
	case 'S':
		c.p.mu.Lock()
		c.due++
		c.lastSent = time.Now()
		c.p.mu.Unlock()
	}
	return nil
}

// pgFromServer relays the server's messages, reading the session's id,
// its transaction status and when a statement is answered.
func (c *conn) pgFromServer() error {
	br := bufio.NewReaderSize(c.server, 32<<10)
	bw := bufio.NewWriterSize(c.client, 32<<10)
	for {
		raw, err := pgRead(br)
		if err != nil {
			bw.Flush()
			return err
		}
		c.p.mu.Lock()
		c.lastRecv = time.Now()
		switch raw[0] {
		case 'K':
			var m pgproto3.BackendKeyData
			if m.Decode(raw[5:]) == nil {
				c.serverID = int64(m.ProcessID)
			}
		case 'Z':
			if c.due > 0 {
				c.due--
			}
			c.execDue = 0
			if len(raw) > 5 {
				c.setStatusLocked(raw[5])
			}
		case 'C', 'I', 's':
			if c.execDue > 0 {
				c.execDue--
			}
		}
		c.p.mu.Unlock()
		if _, err := bw.Write(raw); err != nil {
			return err
		}
		if br.Buffered() == 0 {
			if err := bw.Flush(); err != nil {
				return err
			}
		}
	}
}
