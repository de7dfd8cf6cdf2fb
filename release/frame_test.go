package release

import (
	"encoding/binary"
	"testing"
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
