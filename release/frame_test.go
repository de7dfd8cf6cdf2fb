package release

import (
	"context"
	"encoding/binary"
	"testing"
	"time"
)

func pgMsg(typ byte, body string) []byte {
	m := []byte{typ, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(m[1:], uint32(4+len(body)))
	return append(m, body...)
}

func TestPostgresFirstCutsInsideTheFirstMessage(t *testing.T) {
	parse := pgMsg('P', "\x00SELECT 1\x00\x00\x00")
	batch := append(append(append(append([]byte(nil), parse...), pgMsg('B', "\x00\x00\x00\x00\x00\x00\x00")...), pgMsg('E', "\x00\x00\x00\x00\x00")...), pgMsg('S', "")...)
	cut, hidden := postgresFirst(batch)
	if cut != len(parse)-1 || hidden {
		t.Errorf("Parse/Bind/Execute/Sync: cut %d hidden %v, want %d (the Parse message's last byte), not hidden", cut, hidden, len(parse)-1)
	}
	prepare := append(append(append([]byte(nil), parse...), pgMsg('D', "S\x00")...), pgMsg('S', "")...)
	if _, hidden := postgresFirst(prepare); !hidden {
		t.Error("Parse/Describe/Sync (a prepare) is not hidden; it runs nothing and must not be what is held")
	}
	query := pgMsg('Q', "begin\x00")
	if cut, hidden := postgresFirst(query); cut != len(query)-1 || hidden {
		t.Errorf("simple Query: cut %d hidden %v, want its last byte", cut, hidden)
	}
	tls := []byte{0x17, 3, 3, 0, 5, 1, 2, 3, 4, 5}
	if cut, _ := postgresFirst(tls); cut != len(tls)-1 {
		t.Errorf("TLS record: cut %d, want the last byte", cut)
	}
}

func TestMySQLFirst(t *testing.T) {
	query := append([]byte{9, 0, 0, 0, 0x03}, "SELECT 1"...)
	two := append(append([]byte(nil), query...), query...)
	if cut, hidden := mysqlFirst(two); cut != len(query)-1 || hidden {
		t.Errorf("two COM_QUERY packets: cut %d hidden %v, want %d", cut, hidden, len(query)-1)
	}
	prepare := append([]byte{9, 0, 0, 0, comStmtPrepare}, "SELECT ?"...)
	if _, hidden := mysqlFirst(prepare); !hidden {
		t.Error("COM_STMT_PREPARE is not hidden")
	}
	execute := []byte{5, 0, 0, 0, 0x17, 1, 0, 0, 0}
	if _, hidden := mysqlFirst(execute); hidden {
		t.Error("COM_STMT_EXECUTE is hidden; it is the statement")
	}
	tls := []byte{0x17, 3, 3, 0, 5, 1, 2, 3, 4, 5}
	if cut, hidden := mysqlFirst(tls); cut != len(tls)-1 || hidden {
		t.Errorf("TLS record: cut %d hidden %v, want the last byte", cut, hidden)
	}
}

func TestRESPFirst(t *testing.T) {
	get := "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"
	set := "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n"
	if cut, _ := respFirst([]byte(get + set)); cut != len(get)-1 {
		t.Errorf("pipeline: cut %d, want %d (end of the first command)", cut, len(get)-1)
	}
	partial := "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$100\r\nvvv"
	if cut, _ := respFirst([]byte(partial)); cut != len(partial)-1 {
		t.Errorf("a command cut short by the buffer: cut %d, want the write's last byte", cut)
	}
	if cut, _ := respFirst([]byte("PING\r\n")); cut != 5 {
		t.Errorf("inline command: cut %d, want 5", cut)
	}
}

// The RESP framer's edges, each where a wrong bound or a swapped condition
// would move the cut or panic on what a driver may write (issue 27: these
// lived under gremlins, run on release whole).
func TestRESPFirstAtItsEdges(t *testing.T) {
	get := "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"
	for _, c := range []struct {
		name, p string
		want    int
	}{
		// Inline commands are cut at their first newline, a pipeline too.
		{"inline pipeline", "PING\r\nPING\r\n", 5},
		{"inline empty line first", "\nPING\r\n", 0},
		// An empty bulk string ($0) is a whole argument.
		{"empty argument", "*2\r\n$3\r\nGET\r\n$0\r\n\r\n" + get, len("*2\r\n$3\r\nGET\r\n$0\r\n\r\n") - 1},
		// A bulk length of 20 characters is read (leading zeros).
		{"20-character length", "*1\r\n$00000000000000000003\r\nGET\r\n" + get, len("*1\r\n$00000000000000000003\r\nGET\r\n") - 1},
		// What cannot be walked to the end of a command holds the last byte.
		{"array header alone", "*2\r\n", 3},
		{"bulk length cut short", "*2\r\n$3", 5},
		{"bulk length not a number", "*1\r\n$x\r\nGET\r\n", len("*1\r\n$x\r\nGET\r\n") - 1},
		{"negative bulk length", "*1\r\n$-1\r\n" + get, len("*1\r\n$-1\r\n"+get) - 1},
	} {
		if cut, hidden := respFirst([]byte(c.p)); cut != c.want || hidden {
			t.Errorf("%s (%q): cut %d hidden %v, want %d, not hidden", c.name, c.p, cut, hidden, c.want)
		}
	}
}

func TestMongoFirst(t *testing.T) {
	msg := make([]byte, 40)
	binary.LittleEndian.PutUint32(msg, 30)
	if cut, _ := mongoFirst(msg); cut != 29 {
		t.Errorf("cut %d, want 29", cut)
	}
	binary.LittleEndian.PutUint32(msg, 4000)
	if cut, _ := mongoFirst(msg); cut != len(msg)-1 {
		t.Errorf("length past the write: cut %d, want the last byte", cut)
	}
}

// opMsgCommand is an OP_MSG whose body is {name: 1, $db: "admin"}.
func opMsgCommand(name string) []byte {
	var doc []byte
	doc = append(doc, 0, 0, 0, 0)
	doc = append(doc, 0x10) // int32
	doc = append(doc, name...)
	doc = append(doc, 0, 1, 0, 0, 0)
	doc = append(doc, 0x02) // string
	doc = append(doc, "$db"...)
	doc = append(doc, 0, 6, 0, 0, 0)
	doc = append(doc, "admin"...)
	doc = append(doc, 0, 0)
	binary.LittleEndian.PutUint32(doc, uint32(len(doc)))
	msg := make([]byte, 16, 21+len(doc))
	binary.LittleEndian.PutUint32(msg[4:], 7)
	binary.LittleEndian.PutUint32(msg[12:], opMsg)
	msg = append(msg, 0, 0, 0, 0, 0) // flagBits, body section
	msg = append(msg, doc...)
	binary.LittleEndian.PutUint32(msg, uint32(len(msg)))
	return msg
}

// opQueryCommand is a legacy OP_QUERY of {name: 1} on admin.$cmd, as the
// driver sends its first hello.
func opQueryCommand(name string) []byte {
	full := opMsgCommand(name)
	doc := full[21:]
	msg := make([]byte, 16, 64+len(doc))
	binary.LittleEndian.PutUint32(msg[12:], opQuery)
	msg = append(msg, 0, 0, 0, 0)
	msg = append(msg, "admin.$cmd"...)
	msg = append(msg, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff)
	msg = append(msg, doc...)
	binary.LittleEndian.PutUint32(msg, uint32(len(msg)))
	return msg
}

// The driver's own commands go out at once and leave the connection armed;
// an attempt's command is held at the last byte of its first message. Only a
// hello leaves a connection unclaimed.
func TestMongoCommands(t *testing.T) {
	for name, want := range map[string]struct{ hidden, anonymous bool }{
		"find": {}, "insert": {}, "findAndModify": {}, "update": {},
		"hello": {true, true}, "isMaster": {true, true}, "ismaster": {true, true},
		"ping": {true, false}, "saslStart": {true, false}, "endSessions": {true, false},
	} {
		for _, msg := range [][]byte{opMsgCommand(name), opQueryCommand(name)} {
			if got := mongoCommand(msg); got != name {
				t.Errorf("mongoCommand = %q, want %q", got, name)
			}
			two := append(append([]byte(nil), msg...), opMsgCommand("find")...)
			cut, hidden := mongoFirst(two)
			if cut != len(msg)-1 || hidden != want.hidden {
				t.Errorf("%s: cut %d hidden %v, want %d %v", name, cut, hidden, len(msg)-1, want.hidden)
			}
			if got := mongoAnonymous(msg); got != want.anonymous {
				t.Errorf("%s: anonymous %v, want %v", name, got, want.anonymous)
			}
		}
	}
	compressed := opMsgCommand("hello")
	binary.LittleEndian.PutUint32(compressed[12:], 2012)
	if mongoCommand(compressed) != "" || mongoAnonymous(compressed) {
		t.Error("an OP_COMPRESSED message read as a hello")
	}
}

// The framers' edges, each where a wrong bound or a swapped condition would
// move the cut: the byte the burst is held at (issue 27: these lived under
// gremlins, run on release whole).
func TestFramersAtTheirEdges(t *testing.T) {
	// A first message of one byte is cut at byte 0, not at the write's end.
	if cut := cutAt([]byte("ab"), 1); cut != 0 {
		t.Errorf("cutAt(end 1) = %d, want 0", cut)
	}
	sync := pgMsg('S', "")
	query := pgMsg('Q', "select 1\x00")
	// A bare Sync (5 bytes, no body) is the driver's, not the statement.
	if cut, hidden := postgresFirst(sync); cut != 4 || !hidden {
		t.Errorf("PostgreSQL Sync alone: cut %d hidden %v, want 4 and hidden", cut, hidden)
	}
	// A message with an empty body (length 4) ends after its 5 bytes.
	if cut, _ := postgresFirst(append(append([]byte(nil), sync...), query...)); cut != 4 {
		t.Errorf("Sync then Query: cut %d, want 4 (the Sync's last byte)", cut)
	}
	// Not PostgreSQL (a first byte that is no message type): the last byte.
	notPG := append([]byte{0, 0, 0, 0, 4}, query...)
	if cut, hidden := postgresFirst(notPG); cut != len(notPG)-1 || hidden {
		t.Errorf("a write starting with byte 0: cut %d hidden %v, want the last byte, not hidden", cut, hidden)
	}
	// A write that ends inside a message's header runs something.
	parse := pgMsg('P', "\x00SELECT 1\x00\x00\x00")
	cutShort := append(append([]byte(nil), parse...), 'S', 0)
	if !postgresRuns(cutShort[:len(cutShort):len(cutShort)]) {
		t.Error("a Parse then two bytes of a header: postgresRuns = false, want true (cannot walk it to the end)")
	}
	for b, want := range map[byte]bool{'A': true, 'Z': true, 'a': true, 'z': true, 'Q': true, '@': false, '[': false, '`': false, '{': false, 0x17: false} {
		if got := isUpperASCII(b); got != want {
			t.Errorf("isUpperASCII(%q) = %v, want %v", b, got, want)
		}
	}
	// A MySQL COM_PING is a whole 5-byte write: the driver's.
	if cut, hidden := mysqlFirst([]byte{1, 0, 0, 0, comPing}); cut != 4 || !hidden {
		t.Errorf("MySQL COM_PING alone: cut %d hidden %v, want 4 and hidden", cut, hidden)
	}
	// A 16-byte MongoDB write is framed by its length like a longer one.
	short := make([]byte, 16)
	binary.LittleEndian.PutUint32(short, 8)
	if cut, _ := mongoFirst(short); cut != 7 {
		t.Errorf("a 16-byte Mongo write whose message says 8 bytes: cut %d, want 7", cut)
	}
}

// mongoCommand names a command only where the driver sends one: an OP_QUERY
// on a $cmd collection whole, an OP_MSG whose body has a first key.
func TestMongoCommandRefusesWhatIsNoCommand(t *testing.T) {
	onColl := opQueryCommand("find")
	copy(onColl[20:], "admin.coll") // same length as admin.$cmd
	if got := mongoCommand(onColl); got != "" {
		t.Errorf("OP_QUERY on a collection, not $cmd: %q, want none", got)
	}
	full := opQueryCommand("hello")
	nameEnd := 20 + len("admin.$cmd")
	for _, keep := range []int{nameEnd + 1, nameEnd + 5, nameEnd + 8} {
		if got := mongoCommand(full[:keep]); got != "" {
			t.Errorf("OP_QUERY cut %d bytes after its name: %q, want none", keep-nameEnd, got)
		}
	}
	// An OP_MSG whose body is the empty document, more bytes after it.
	msg := opMsgCommand("find")[:21]
	msg = append(msg, 5, 0, 0, 0, 0)
	msg = append(msg, "ab\x00"...)
	if got := mongoCommand(msg); got != "" {
		t.Errorf("OP_MSG with an empty body: %q, want none", got)
	}
}

// A park wait left unset (0, or negative) is the default; one set is kept.
func TestNewWireWithParkWait(t *testing.T) {
	for set, want := range map[time.Duration]time.Duration{0: DefaultParkWait, -time.Second: DefaultParkWait, 7 * time.Millisecond: 7 * time.Millisecond} {
		if got := NewWireWith("postgres", WireOptions{ParkWait: set}).parkWait; got != want {
			t.Errorf("ParkWait %v: the wire waits %v, want %v", set, got, want)
		}
	}
}

// A connection dialled with no worker's context inside a worker's claim
// window is that worker's (a driver dialling from its own goroutine), except
// where the protocol says whose a connection is by its first message
// (MongoDB's monitors dial and send hello in such windows too).
func TestDialInAClaimWindow(t *testing.T) {
	ln := sink(t)
	for backend, owned := range map[string]bool{"postgres": true, "mongo": false} {
		w := NewWire(backend, 0)
		end := w.Claim(0)
		c, err := w.Dial(context.Background(), "tcp", ln.Addr().String())
		end()
		if err != nil {
			t.Fatal(err)
		}
		if got := w.Ready(1) == nil; got != owned {
			t.Errorf("%s: a connection dialled in worker 0's claim window is its own: %v, want %v", backend, got, owned)
		}
		c.Close()
	}
}
