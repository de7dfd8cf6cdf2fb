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
type framer func(p []byte) int

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
func postgresFirst(p []byte) int {
	if len(p) < 5 || !isUpperASCII(p[0]) {
		return lastByte(p)
	}
	n := int(binary.BigEndian.Uint32(p[1:5]))
	if n < 4 {
		return lastByte(p)
	}
	return cutAt(p, 1+n)
}

func isUpperASCII(b byte) bool { return b >= 'A' && b <= 'Z' || b >= 'a' && b <= 'z' }

// mysqlFirst frames MySQL packets: a 3-byte little-endian payload length
// and a sequence number, then the payload.
func mysqlFirst(p []byte) int {
	if len(p) < 4 {
		return lastByte(p)
	}
	n := int(p[0]) | int(p[1])<<8 | int(p[2])<<16
	return cutAt(p, 4+n)
}

// mongoFirst frames MongoDB wire messages: a little-endian int32 total
// length first.
func mongoFirst(p []byte) int {
	if len(p) < 16 {
		return lastByte(p)
	}
	return cutAt(p, int(int32(binary.LittleEndian.Uint32(p[:4]))))
}

// respFirst frames Redis commands: a RESP array of bulk strings
// (*<n>\r\n then n times $<len>\r\n<bytes>\r\n), or an inline command
// ending in \n.
func respFirst(p []byte) int {
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

// framers by backend name; other backends hold the write's last byte.
var framers = map[string]framer{
	"postgres": postgresFirst,
	"mysql":    mysqlFirst,
	"redis":    respFirst,
	"mongo":    mongoFirst,
}
