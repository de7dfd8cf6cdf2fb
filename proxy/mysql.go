package proxy

import (
	"bufio"
	"encoding/binary"
	"io"
	"time"
)

// MySQL's (and MariaDB's) wire protocol: packets of a 3-byte
// little-endian length and a sequence number; a payload of 0xFFFFFF
// bytes continues in the next packet. The server speaks first (its
// greeting), the client answers, authentication runs until the server's
// OK, and then each client command (sequence 0) gets its response.
//
// The proxy changes one thing: the greeting's capability flags lose
// CLIENT_SSL (so a client does not ask for TLS: the proxy speaks
// plaintext) and the compression flags (so every packet stays readable).
// Everything else is relayed as read.

const (
	capCompress        = 0x00000020
	capSSL             = 0x00000800
	capDeprecateEOF    = 0x01000000
	capZstd            = 0x04000000
	capQueryAttributes = 0x08000000
	capOptionalMeta    = 0x02000000

	statusInTrans      = 0x0001
	statusMoreResults  = 0x0008
	statusCursorExists = 0x0040

	myMaxPayload = 0xFFFFFF

	comQuit         = 0x01
	comQuery        = 0x03
	comFieldList    = 0x04
	comStatistics   = 0x09
	comChangeUser   = 0x11
	comStmtPrepare  = 0x16
	comStmtExecute  = 0x17
	comStmtSendLong = 0x18
	comStmtClose    = 0x19
	comStmtFetch    = 0x1c
	comPing         = 0x0e
	comInitDB       = 0x02
	comStmtReset    = 0x1a
	comSetOption    = 0x1b
	comResetConn    = 0x1f
	comDebug        = 0x0d
)

// Phases of a MySQL connection.
const (
	myGreeting = iota
	myAuth
	myCommand
)

// Kinds of response the server owes a command.
const (
	respResult  = iota // OK, ERR, LOCAL INFILE or result sets (COM_QUERY, COM_STMT_EXECUTE)
	respPrepare        // COM_STMT_PREPARE: OK with the statement id, then metadata
	respOne            // one packet (OK, ERR, EOF, a string)
	respRows           // packets to an EOF or ERR (COM_STMT_FETCH, COM_FIELD_LIST)
)

// States of a respResult.
const (
	stStart = iota
	stCols
	stColsEOF
	stRows
)

type myResponse struct {
	kind  int
	text  string // COM_STMT_PREPARE's statement
	state int
	left  int
}

// myRead reads one packet: raw with its header, and the payload.
func myRead(br *bufio.Reader) (raw []byte, err error) {
	var hdr [4]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		return nil, err
	}
	n := int(hdr[0]) | int(hdr[1])<<8 | int(hdr[2])<<16
	raw = make([]byte, 4+n)
	copy(raw, hdr[:])
	if _, err := io.ReadFull(br, raw[4:]); err != nil {
		return nil, err
	}
	return raw, nil
}

// myFromClient relays the client's packets; a command (sequence 0, read
// with its continuation packets) is read for the statement it runs.
func (c *conn) myFromClient() error {
	br := bufio.NewReaderSize(c.client, 32<<10)
	first := true
	for {
		raw, err := myRead(br)
		if err != nil {
			return err
		}
		c.p.mu.Lock()
		phase := c.mysqlPhase
		if phase == myAuth && first && len(raw) >= 8 {
			c.caps = binary.LittleEndian.Uint32(raw[4:8])
			if c.caps&(capOptionalMeta|capQueryAttributes) != 0 || c.caps&1 == 0 && len(raw) >= 36 && raw[4+28]&(1<<4) != 0 {
				c.lost = true // responses shaped in ways the proxy does not follow
			}
			first = false
		}
		c.p.mu.Unlock()
		if phase != myCommand || raw[3] != 0 || len(raw) == 4 {
			if err := c.sendServer(raw, br.Buffered() == 0); err != nil {
				return err
			}
			continue
		}
		payload := raw[4:]
		for last := raw; len(last) == 4+myMaxPayload; {
			if last, err = myRead(br); err != nil {
				return err
			}
			raw = append(raw, last...)
			payload = append(payload[:len(payload):len(payload)], last[4:]...)
		}
		st := c.myCommand(payload)
		if err := c.forward(raw, st, br.Buffered() > 0); err != nil {
			return err
		}
	}
}

// myCommand reads a command: the statement it runs (COM_QUERY,
// COM_STMT_EXECUTE), or nil after noting the response it is owed.
func (c *conn) myCommand(p []byte) *statement {
	expect := func(r *myResponse) func() {
		return func() { c.myPending = append(c.myPending, r) }
	}
	var owed *myResponse
	switch p[0] {
	case comQuery:
		text := string(p[1:])
		if c.caps&capQueryAttributes != 0 {
			text = "(query with attributes)"
		}
		return &statement{text: text, write: WritesOrLocks(text, c.p.dialect), mark: expect(&myResponse{kind: respResult})}
	case comStmtExecute:
		text := "(unknown prepared statement)"
		if len(p) >= 5 {
			c.p.mu.Lock()
			if t, ok := c.myStmts[binary.LittleEndian.Uint32(p[1:5])]; ok {
				text = t
			}
			c.p.mu.Unlock()
		}
		return &statement{text: text, write: WritesOrLocks(text, c.p.dialect), mark: expect(&myResponse{kind: respResult})}
	case comStmtPrepare:
		owed = &myResponse{kind: respPrepare, text: string(p[1:])}
	case comStmtClose:
		if len(p) >= 5 {
			c.p.mu.Lock()
			delete(c.myStmts, binary.LittleEndian.Uint32(p[1:5]))
			c.p.mu.Unlock()
		}
	case comStmtSendLong, comQuit:
		// no response
	case comStmtFetch, comFieldList:
		owed = &myResponse{kind: respRows}
	case comPing, comInitDB, comStmtReset, comSetOption, comResetConn, comDebug, comStatistics:
		owed = &myResponse{kind: respOne}
	case comChangeUser:
		c.p.mu.Lock()
		c.mysqlPhase = myAuth
		c.p.mu.Unlock()
	default:
		c.p.mu.Lock()
		c.lost = true
		c.p.mu.Unlock()
	}
	if owed != nil {
		c.p.mu.Lock()
		if owed.kind == respPrepare {
			c.p.joinLocked(c) // preparing opens the tables: it may wait on a lock
		}
		expect(owed)()
		c.lastSent = time.Now()
		c.p.mu.Unlock()
	}
	return nil
}

// myFromServer relays the server's packets, clearing the greeting's TLS
// and compression flags, and follows each response to its end for the
// session's id, its transaction status and when a command is answered.
func (c *conn) myFromServer() error {
	br := bufio.NewReaderSize(c.server, 32<<10)
	bw := bufio.NewWriterSize(c.client, 32<<10)
	cont := false
	for {
		raw, err := myRead(br)
		if err != nil {
			bw.Flush()
			return err
		}
		p := raw[4:]
		c.p.mu.Lock()
		c.lastRecv = time.Now()
		switch {
		case cont || len(p) == 0:
		case c.mysqlPhase == myGreeting:
			c.myGreetingLocked(p)
			c.mysqlPhase = myAuth
		case c.mysqlPhase == myAuth:
			if p[0] == 0x00 {
				c.mysqlPhase = myCommand
				c.myStatusLocked(p)
			}
		default:
			c.myResponseLocked(p)
		}
		cont = len(p) == myMaxPayload
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

// myGreetingLocked reads the server's greeting (protocol 10): the
// connection id, and the capability flags, from which it clears TLS and
// compression in place.
func (c *conn) myGreetingLocked(p []byte) {
	if p[0] != 10 {
		return // an error packet, or a protocol the proxy does not read
	}
	i := 1
	for i < len(p) && p[i] != 0 {
		i++
	}
	i++ // the version's NUL
	if i+4 > len(p) {
		return
	}
	c.serverID = int64(binary.LittleEndian.Uint32(p[i : i+4]))
	i += 4 + 8 + 1 // connection id, auth data part 1, filler
	if i+2 > len(p) {
		return
	}
	lower := binary.LittleEndian.Uint16(p[i:i+2]) &^ uint16(capSSL|capCompress)
	binary.LittleEndian.PutUint16(p[i:i+2], lower)
	j := i + 2 + 1 + 2 // charset, status
	if j+2 <= len(p) {
		upper := binary.LittleEndian.Uint16(p[j:j+2]) &^ uint16(capZstd>>16)
		binary.LittleEndian.PutUint16(p[j:j+2], upper)
	}
}

// myResponseLocked follows the response at the head of the owed queue
// by one packet.
func (c *conn) myResponseLocked(p []byte) {
	if len(c.myPending) == 0 {
		return
	}
	r := c.myPending[0]
	deprecate := c.caps&capDeprecateEOF != 0
	eof := p[0] == 0xFE && len(p) < myMaxPayload
	done := false
	switch r.kind {
	case respOne:
		c.myStatusLocked(p)
		done = true
	case respRows:
		if p[0] == 0xFF || eof {
			c.myStatusLocked(p)
			done = true
		}
	case respPrepare:
		switch {
		case r.state == 0 && p[0] == 0x00 && len(p) >= 9:
			id := binary.LittleEndian.Uint32(p[1:5])
			cols := int(binary.LittleEndian.Uint16(p[5:7]))
			params := int(binary.LittleEndian.Uint16(p[7:9]))
			c.myStmts[id] = r.text
			r.left = params + cols
			if !deprecate {
				r.left += min(params, 1) + min(cols, 1)
			}
			r.state = 1
			done = r.left == 0
		case r.state == 0:
			done = true // an error
		default:
			r.left--
			done = r.left <= 0
		}
	case respResult:
		switch r.state {
		case stStart:
			switch p[0] {
			case 0x00:
				done = c.myStatusLocked(p)&statusMoreResults == 0
			case 0xFF:
				done = true
			case 0xFB:
				// LOCAL INFILE: the client sends the file; an OK follows.
			default:
				n, _ := lenenc(p)
				r.left, r.state = int(n), stCols
				if n == 0 {
					r.state = stRows
				}
			}
		case stCols:
			r.left--
			if r.left <= 0 {
				r.state = stRows
				if !deprecate {
					r.state = stColsEOF
				}
			}
		case stColsEOF:
			if c.myStatusLocked(p)&statusCursorExists != 0 {
				done = true // rows come by COM_STMT_FETCH
			}
			r.state = stRows
		case stRows:
			switch {
			case p[0] == 0xFF:
				done = true
			case eof:
				if c.myStatusLocked(p)&statusMoreResults != 0 {
					r.state = stStart
				} else {
					done = true
				}
			}
		}
	}
	if done {
		c.myPending = c.myPending[1:]
	}
}

// myStatusLocked reads the status flags of an OK or EOF packet (0 for
// another), and the transaction state from them.
func (c *conn) myStatusLocked(p []byte) uint16 {
	var status uint16
	switch {
	case p[0] == 0xFE && len(p) < 9 && c.caps&capDeprecateEOF == 0:
		if len(p) < 5 {
			return 0
		}
		status = binary.LittleEndian.Uint16(p[3:5])
	case p[0] == 0x00 || p[0] == 0xFE:
		_, n := lenenc(p[1:])
		_, m := lenenc(p[1+n:])
		i := 1 + n + m
		if n == 0 || m == 0 || i+2 > len(p) {
			return 0
		}
		status = binary.LittleEndian.Uint16(p[i : i+2])
	default:
		return 0
	}
	if status&statusInTrans != 0 {
		c.setStatusLocked('T')
	} else {
		c.setStatusLocked('I')
	}
	return status
}

// lenenc reads a length-encoded integer: its value and its size (0 when
// p is too short).
func lenenc(p []byte) (uint64, int) {
	if len(p) == 0 {
		return 0, 0
	}
	switch p[0] {
	case 0xFC:
		if len(p) < 3 {
			return 0, 0
		}
		return uint64(binary.LittleEndian.Uint16(p[1:3])), 3
	case 0xFD:
		if len(p) < 4 {
			return 0, 0
		}
		return uint64(p[1]) | uint64(p[2])<<8 | uint64(p[3])<<16, 4
	case 0xFE:
		if len(p) < 9 {
			return 0, 0
		}
		return binary.LittleEndian.Uint64(p[1:9]), 9
	}
	return uint64(p[0]), 1
}
