package proxy

import (
	"strconv"
	"strings"

	"github.com/racetest/racetest/explore"
)

// What a statement does, as far as holding it goes: a statement that
// writes or takes a lock is where a request's check ends and its act
// begins, so it is the one a burst holds. Everything else (reads,
// transaction control, settings) runs at once.
//
// The reading is the text's, through explore's scanner, which skips
// strings and comments exactly as the server does and says where it is
// not certain. Wherever the text leaves a doubt — a scan that is not
// certain, a first word not listed here, a function in a SELECT that is
// not a known read-only one (it may write, or lock: pg_advisory_lock,
// GET_LOCK, nextval) — the statement counts as a write.

// readVerbs are first words of statements that neither write nor lock.
var readVerbs = map[string]bool{
	"SHOW": true, "DESCRIBE": true, "DESC": true, "HELP": true,
	"BEGIN": true, "START": true, "COMMIT": true, "ROLLBACK": true, "END": true, "ABORT": true,
	"SAVEPOINT": true, "RELEASE": true, "SET": true, "RESET": true, "USE": true,
	"DEALLOCATE": true, "DISCARD": true, "LISTEN": true, "UNLISTEN": true,
	"CLOSE": true, "FETCH": true, "MOVE": true,
}

// queryVerbs are first words of statements read by the query rules:
// FOR UPDATE and its kin, INTO, function calls, data-modifying parts.
var queryVerbs = map[string]bool{"SELECT": true, "VALUES": true, "TABLE": true, "WITH": true}

// modifying words make a query a write wherever they appear (a WITH's
// data-modifying part, a FOR UPDATE's UPDATE).
var modifying = map[string]bool{"INSERT": true, "UPDATE": true, "DELETE": true, "MERGE": true, "REPLACE": true, "UPSERT": true}

// readFuncs are words that may stand before "(" in a query without
// writing or locking: keywords and the common read-only functions of
// both servers. Any other name followed by "(" is a call of something
// that may write or lock.
var readFuncs = wordSet(`
	SELECT FROM WHERE AND OR NOT IN EXISTS ANY ALL SOME ON USING JOIN AS IS
	VALUES OVER PARTITION BY FILTER WITHIN HAVING LIMIT OFFSET UNION INTERSECT
	EXCEPT CASE WHEN THEN ELSE LATERAL ROW ARRAY INTERVAL BETWEEN LIKE ILIKE
	SIMILAR DISTINCT GROUP ORDER WITH RECURSIVE AT ZONE TIME TIMESTAMP DATE
	COUNT SUM MIN MAX AVG COALESCE NULLIF GREATEST LEAST IF IFNULL ISNULL NVL
	LOWER UPPER LENGTH CHAR_LENGTH CHARACTER_LENGTH OCTET_LENGTH CONCAT CONCAT_WS
	SUBSTRING SUBSTR TRIM LTRIM RTRIM BTRIM LEFT RIGHT LPAD RPAD POSITION STRPOS
	SPLIT_PART REPLACE REGEXP_REPLACE REGEXP_LIKE REGEXP_MATCHES REVERSE REPEAT
	ABS ROUND FLOOR CEIL CEILING MOD POWER SQRT SIGN TRUNC TRUNCATE
	CAST CONVERT EXTRACT NOW CURRENT_TIMESTAMP CURRENT_DATE CURRENT_TIME
	LOCALTIMESTAMP UTC_TIMESTAMP SYSDATE CURDATE CURTIME DATE_FORMAT DATE_ADD
	DATE_SUB DATEDIFF TIMESTAMPDIFF TIMESTAMPADD UNIX_TIMESTAMP FROM_UNIXTIME
	DATE_TRUNC DATE_PART AGE TO_CHAR TO_DATE TO_TIMESTAMP TO_NUMBER MAKE_INTERVAL
	ARRAY_AGG STRING_AGG GROUP_CONCAT JSON_AGG JSONB_AGG JSON_OBJECT_AGG
	JSONB_OBJECT_AGG JSON_ARRAYAGG JSON_OBJECTAGG BOOL_AND BOOL_OR EVERY
	JSON_BUILD_OBJECT JSONB_BUILD_OBJECT JSON_BUILD_ARRAY JSONB_BUILD_ARRAY
	TO_JSON TO_JSONB ROW_TO_JSON JSON_OBJECT JSON_ARRAY JSON_EXTRACT JSON_UNQUOTE
	JSON_CONTAINS JSON_LENGTH JSONB_ARRAY_LENGTH JSON_ARRAY_LENGTH
	ROW_NUMBER RANK DENSE_RANK LAG LEAD FIRST_VALUE LAST_VALUE NTILE
	ARRAY_LENGTH CARDINALITY UNNEST GENERATE_SERIES ANY_VALUE
	MD5 SHA1 SHA2 HEX UNHEX ENCODE DECODE FIELD FIND_IN_SET
	LAST_INSERT_ID FOUND_ROWS ROW_COUNT CONNECTION_ID PG_BACKEND_PID VERSION
	DATABASE SCHEMA CURRENT_DATABASE CURRENT_SCHEMA CURRENT_USER USER
	CURRENT_SETTING INET_ATON INET_NTOA CHAR CHR ASCII ORD FORMAT
	UUID GEN_RANDOM_UUID RANDOM RAND INT INTEGER BIGINT NUMERIC DECIMAL VARCHAR
	FLOAT DOUBLE`)

func wordSet(s string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(s) {
		m[w] = true
	}
	return m
}

// WritesOrLocks reports whether the statement text (one statement or
// several) may write or take a lock, as server d reads it: true where the
// text leaves a doubt.
func WritesOrLocks(text string, d explore.Dialect) bool {
	toks, ok := explore.Scan(text, d)
	if !ok {
		return true
	}
	for _, stmt := range statements(toks) {
		if statementWrites(stmt) {
			return true
		}
	}
	return false
}

// statements splits tokens at ";" (empty statements left out).
func statements(toks []explore.Token) [][]string {
	var out [][]string
	var cur []string
	for _, t := range toks {
		if t.Text == ";" {
			if len(cur) > 0 {
				out = append(out, cur)
			}
			cur = nil
			continue
		}
		cur = append(cur, t.Text)
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

func statementWrites(toks []string) bool {
	i := 0
	for i < len(toks) && toks[i] == "(" {
		i++
	}
	if i == len(toks) {
		return true
	}
	verb := toks[i]
	switch {
	case verb == "EXPLAIN":
		// EXPLAIN ANALYZE runs the statement.
		for _, t := range toks[i+1:] {
			if t == "ANALYZE" || t == "ANALYSE" {
				return true
			}
		}
		return false
	case readVerbs[verb]:
		return false
	case queryVerbs[verb]:
		return queryWrites(toks[i:])
	}
	return true
}

// queryWrites reads a SELECT, VALUES, TABLE or WITH: a write when it
// names a data-modifying statement or a locking clause (FOR UPDATE, FOR
// NO KEY UPDATE, FOR SHARE, FOR KEY SHARE, LOCK IN SHARE MODE), selects
// INTO a table or a file, or calls a function not known to only read.
func queryWrites(toks []string) bool {
	for k, t := range toks {
		next := ""
		if k+1 < len(toks) {
			next = toks[k+1]
		}
		switch {
		case modifying[t]:
			return true
		case t == "FOR" && (next == "SHARE" || next == "KEY" || next == "NO"):
			return true
		case t == "LOCK" && next == "IN":
			return true
		case t == "INTO" && next != "@":
			return true // PostgreSQL's SELECT … INTO makes a table; MySQL's INTO OUTFILE writes a file
		case next == "(" && isWord(t) && !readFuncs[t]:
			return true
		}
	}
	return false
}

// isWord: a name or keyword token (not punctuation, a string or a number).
func isWord(t string) bool {
	if t == "" {
		return false // a string ("'") and a parameter ("?") start with no word's byte either
	}
	c := t[0]
	return c == '"' || c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= 0x80
}

// maxNormalized bounds a normalized statement in an account: a long
// multi-row INSERT says what it is in its first few hundred characters.
const maxNormalized = 600

// Normalize writes a statement for a trace: each string and number
// literal becomes a placeholder ($n in PostgreSQL, numbered after the
// statement's own parameters; ? in MySQL), comments go, and runs of
// space become one. A text the scanner is not certain of keeps its
// literals, with its space collapsed.
func Normalize(text string, d explore.Dialect) string {
	toks, ok := explore.Scan(text, d)
	if !ok {
		return clip(strings.Join(strings.Fields(text), " "))
	}
	next := 1
	if d == explore.Postgres {
		for _, t := range toks {
			if t.Text == "?" {
				if n, err := strconv.Atoi(text[t.Start+1 : t.End]); err == nil && n >= next {
					next = n + 1
				}
			}
		}
	}
	var b strings.Builder
	for k, t := range toks {
		if k > 0 && t.Start > toks[k-1].End {
			b.WriteByte(' ')
		}
		if !isLiteral(t.Text) {
			b.WriteString(text[t.Start:t.End])
			continue
		}
		if d == explore.Postgres {
			b.WriteString("$" + strconv.Itoa(next))
			next++
		} else {
			b.WriteByte('?')
		}
	}
	return clip(b.String())
}

func isLiteral(t string) bool {
	if t == "'" {
		return true
	}
	return t != "" && (t[0] >= '0' && t[0] <= '9' || t[0] == '.' && len(t) > 1)
}

func clip(s string) string {
	if len(s) <= maxNormalized {
		return s
	}
	cut := maxNormalized
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}
