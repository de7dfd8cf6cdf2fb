package release

import (
	"bytes"
	"encoding/binary"
	"strconv"
)

// A framer says where to cut a request: the bytes before the cut go out at
// once, the rest are held back. The cut is the final byte of the request's
// first protocol message, not of the write: a server executes each complete
// message as it arrives, so with several messages in one write (PostgreSQL's
// Parse/Bind/Execute/Sync, a pipeline) holding only the write's last byte
// would let the server run all but the last message early. PostgreSQL was
// measured doing exactly that with a pipelined BEGIN and SELECT: both ran
// when the prefix arrived, and only the replies waited for the held Sync.
//
// A framer returns len(p)-1 (the write's last byte) when p does not parse as
// its protocol, a TLS record for instance: a record is decrypted only once
// it is whole, so its last byte holds everything back.
//
// hidden reports a request the driver makes on its own behalf before the
// attempt's statement (a prepare, a statement close, a ping): it goes out at
// once and the connection stays armed for the statement itself. Holding the
// prepare would release the prepares together, and the statements a round
// trip later, each on its own.
type framer func(p []byte) (cut int, hidden bool)

func lastByteOnly(p []byte) (int, bool) { return lastByte(p), false }

func lastByte(p []byte) int { return len(p) - 1 }

// cutAt returns end-1 when the first message ends at end within p.
func cutAt(p []byte, end int) int {
	if end < 1 || end > len(p) {
		return lastByte(p)
	}
	return end - 1
}

// postgresFirst frames PostgreSQL frontend messages: a type byte, then a
// big-endian length that counts itself but not the type byte.
//
// A write without an Execute, a simple Query or a FunctionCall (Parse and
// Describe then Sync: pgx preparing a statement it will cache) runs nothing.
func postgresFirst(p []byte) (int, bool) {
	if len(p) < 5 || !isUpperASCII(p[0]) {
		return lastByte(p), false
	}
	n := int(binary.BigEndian.Uint32(p[1:5]))
	if n < 4 {
		return lastByte(p), false
	}
	return cutAt(p, 1+n), !postgresRuns(p)
}

// postgresRuns reports whether the messages in p execute anything. A write
// it cannot walk to the end is taken to run something.
func postgresRuns(p []byte) bool {
	for i := 0; i < len(p); {
		if i+5 > len(p) {
			return true
		}
		switch p[i] {
		case 'E', 'Q', 'F':
			return true
		case 'P', 'D', 'S', 'C', 'H':
		default:
			return true
		}
		n := int(binary.BigEndian.Uint32(p[i+1 : i+5]))
		if n < 4 {
			return true
		}
		i += 1 + n
	}
	return false
}

func isUpperASCII(b byte) bool { return b >= 'A' && b <= 'Z' || b >= 'a' && b <= 'z' }

// mysqlFirst frames MySQL packets: a 3-byte little-endian payload length
// and a sequence number, then the payload.
//
// COM_STMT_PREPARE, COM_STMT_CLOSE, COM_STMT_RESET and COM_PING are the
// driver's own (go-sql-driver prepares, executes and closes every statement
// with arguments unless interpolateParams is set).
func mysqlFirst(p []byte) (int, bool) {
	if len(p) < 5 {
		return lastByte(p), false
	}
	n := int(p[0]) | int(p[1])<<8 | int(p[2])<<16
	cut := cutAt(p, 4+n)
	if cut != 4+n-1 {
		return cut, false
	}
	switch p[4] {
	case comPing, comStmtPrepare, comStmtClose, comStmtReset:
		return cut, true
	}
	return cut, false
}

// MySQL command bytes.
const (
	comPing        = 0x0e
	comStmtPrepare = 0x16
	comStmtClose   = 0x19
	comStmtReset   = 0x1a
)

// mongoFirst frames MongoDB wire messages: a little-endian int32 total
// length first. A handshake or heartbeat (hello), a ping, an authentication
// step or an endSessions is the driver's own.
func mongoFirst(p []byte) (int, bool) {
	if len(p) < 16 {
		return lastByte(p), false
	}
	cut := cutAt(p, int(int32(binary.LittleEndian.Uint32(p[:4]))))
	switch mongoCommand(p) {
	case "hello", "isMaster", "ismaster", "ping", "saslStart", "saslContinue", "endSessions":
		return cut, true
	}
	return cut, false
}

// mongoAnonymous reports a message that says nothing about whose connection
// it is on: a hello, which every connection sends first and the driver's
// monitors send alone (their heartbeat and round-trip probes). A monitor
// dialled or probing while a worker's session is being opened is then not
// taken for the worker's.
func mongoAnonymous(p []byte) bool {
	switch mongoCommand(p) {
	case "hello", "isMaster", "ismaster":
		return true
	}
	return false
}

// MongoDB opcodes.
const (
	opQuery = 2004 // legacy; the driver's first hello goes as one
	opMsg   = 2013
)

// mongoCommand returns the command name of the first message in p — the
// first key of an OP_MSG body, or of an OP_QUERY on a $cmd collection — or
// "" when p holds something else (OP_COMPRESSED: the driver never compresses
// a hello or an authentication step).
func mongoCommand(p []byte) string {
	if len(p) < 21 {
		return ""
	}
	var doc []byte
	switch binary.LittleEndian.Uint32(p[12:16]) {
	case opMsg:
		if p[20] != 0 { // the body section comes first
			return ""
		}
		doc = p[21:]
	case opQuery:
		name := p[20:]
		end := bytes.IndexByte(name, 0)
		if end < 0 || !bytes.HasSuffix(name[:end], []byte(".$cmd")) || len(name) < end+9 {
			return ""
		}
		doc = name[end+9:] // after the name's NUL, numberToSkip, numberToReturn
	default:
		return ""
	}
	// A BSON document: int32 length, then elements of a type byte and a
	// NUL-terminated key.
	if len(doc) < 6 || doc[4] == 0 {
		return ""
	}
	key := doc[5:]
	end := bytes.IndexByte(key, 0)
	if end < 0 {
		return ""
	}
	return string(key[:end])
}

// respFirst frames Redis commands: a RESP array of bulk strings
// (*<n>\r\n then n times $<len>\r\n<bytes>\r\n), or an inline command
// ending in \n.
func respFirst(p []byte) (int, bool) {
	return respCut(p), false
}

func respCut(p []byte) int {
	if len(p) == 0 || p[0] != '*' {
		if i := bytes.IndexByte(p, '\n'); i >= 0 {
			return cutAt(p, i+1)
		}
		return lastByte(p)
	}
	count, i, ok := respInt(p, 1)
	if !ok {
		return lastByte(p)
	}
	for range count {
		if i >= len(p) || p[i] != '$' {
			return lastByte(p)
		}
		var n int
		if n, i, ok = respInt(p, i+1); !ok || n < 0 {
			return lastByte(p)
		}
		i += n + 2
	}
	return cutAt(p, i)
}

// respInt reads a decimal up to \r\n at p[i:], returning it and the index
// after the \r\n.
func respInt(p []byte, i int) (int, int, bool) {
	end := bytes.Index(p[i:], []byte("\r\n"))
	if end < 0 || end > 20 {
		return 0, 0, false
	}
	n, err := strconv.Atoi(string(p[i : i+end]))
	if err != nil {
		return 0, 0, false
	}
	return n, i + end + 2, true
}

// anonymous, by backend name, reports a write that does not tell whose
// connection it is on: it does not claim the connection for the worker whose
// session is being opened, and a connection dialled in a claim window waits
// for its first other write to be claimed.
var anonymous = map[string]func(p []byte) bool{
	"mongo": mongoAnonymous,
}

// framers by backend name; other backends hold the write's last byte.
var framers = map[string]framer{
	"postgres": postgresFirst,
	"mysql":    mysqlFirst,
	"redis":    respFirst,
	"mongo":    mongoFirst,
}
