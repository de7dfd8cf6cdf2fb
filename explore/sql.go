package explore

import "strings"

// SQL reads what a SQL statement touches, for ByAccess: the tables it
// reads and writes, each as a whole (Key ""). It is the SQL dialect's
// reading of a step, written over the statement's text alone, so it says
// All wherever the text cannot vouch for what the server will touch.
//
// Why tables and never rows: two statements on different rows of one
// table need not commute. PostgreSQL at serializable takes a predicate
// lock on the whole table when its plan scans it (a two-row table is
// scanned, index or not), and InnoDB locks every row it scans, and the
// gap past a missing key: whether "WHERE id = 1" and "WHERE id = 2" wait
// on each other is the plan's and the schema's to say, not the text's.
type SQL struct {
	// Known reports a table whose every access the statement's text
	// shows: made by the run's setup, with no trigger, foreign key, rule
	// or view that would reach another table behind the text. Any other
	// table is taken as every table ("*").
	Known func(table string) bool
	// Snapshot: a transaction may keep one snapshot for all its
	// statements (repeatable read, or a level the run does not know). Its
	// first statement then fixes what the later ones see of every table,
	// and a write or a commit elsewhere is seen or not by where it falls:
	// only two plain reads are judged apart, every other step touches
	// everything.
	Snapshot bool
	// Serializable: nothing commutes. PostgreSQL's serializable picks the
	// transaction it fails by the order in which it finds the conflicts,
	// reads included; MySQL's turns every read into a locking one.
	Serializable bool
	// Dialect is the server's SQL, whose quoting and comments the
	// statement's text is read by (AnyDialect: read as each, certain only
	// where they agree).
	Dialect Dialect
}

// locks stands for the server's lock manager: every step that may wait on
// a lock touches it, so no two such steps are ever swapped. Whether they
// wait, and which one a deadlock ends, depends on the order in which the
// waits begin, even on two tables (A waits on B's row of t, then B on A's
// row of u: the server ends the one whose wait closed the cycle, or the
// first to wait).
var locks = Access{Table: "(lock manager)", Write: true}

// Commute says which steps commute under these rules, for the note that
// says how many orders the reduction spared.
func (s SQL) Commute() string {
	switch {
	case s.Serializable:
		return "none: at serializable, or a level a script sets, no two steps are swapped"
	case s.Snapshot:
		return "two plain reads: a transaction keeps one snapshot, so a write or a commit is swapped with nothing"
	}
	return "a plain read with a step on other tables, a commit with steps its transaction's writes do not reach; " +
		"never two steps that may wait on a lock"
}

// Independent is ByAccess over the statements text gives for each
// attempt's step (false: a step that is no statement, which touches
// everything).
func (s SQL) Independent(text func(attempt int, name string) (string, bool)) Independent {
	return ByAccess(func(a int, name string) Footprint {
		t, ok := text(a, name)
		if !ok {
			return Footprint{All: true}
		}
		return s.Footprint(t)
	})
}

// Footprint is what the statement text touches, as the server reads it:
// All where the scanner of its dialect is not certain of that reading.
func (s SQL) Footprint(text string) Footprint {
	toks, ok := sqlTokens(text, s.Dialect)
	if !ok || len(toks) == 0 {
		return Footprint{All: true}
	}
	all := Footprint{All: true}
	if s.Serializable {
		return all
	}
	ends := Footprint{Ends: true}
	if s.Snapshot {
		ends = all // where it falls decides which snapshots see it
	}
	switch toks[0] {
	case "COMMIT", "END":
		return ends
	case "ROLLBACK", "ABORT":
		if slicesContains(toks, "TO") {
			return all // back to a savepoint: releases some locks, keeps others
		}
		return ends
	case "SELECT", "INSERT", "REPLACE", "UPDATE", "DELETE":
	default:
		return all // WITH, SET, DDL, CALL, LOCK, BEGIN (an implicit commit), …
	}
	write := toks[0] != "SELECT"
	for i, t := range toks {
		switch t {
		case "INTO", "FOR", "LOCK", "RETURNING":
			if toks[0] == "SELECT" {
				return all // SELECT … INTO, FOR UPDATE/SHARE, LOCK IN SHARE MODE: not a plain read
			}
		case "WITH", "CALL", "EXECUTE":
			return all
		}
		if i+1 < len(toks) && toks[i+1] == "(" && !sqlPure[t] && !sqlTableWord[prev(toks, i)] {
			return all // a call of a function that may write (nextval, a user's function)
		}
	}
	if write && s.Snapshot {
		return all
	}
	tables, ok := sqlTables(toks)
	if !ok {
		return all // a table named where the reading cannot follow: (a JOIN b), FROM 1t
	}
	// A plain read at read committed or below takes no lock and holds
	// nothing: its transaction's end owes it nothing.
	f := Footprint{Fleeting: !write}
	if write {
		f.Accesses = append(f.Accesses, locks)
	}
	for _, table := range tables {
		if s.Known == nil || !s.Known(table) {
			table = "*"
		}
		f.Accesses = append(f.Accesses, Access{Table: table, Write: write})
	}
	if len(f.Accesses) == 1 && write {
		return all // a write whose table the text does not name
	}
	return f
}

func prev(toks []string, i int) string {
	if i == 0 {
		return ""
	}
	return toks[i-1]
}

func slicesContains(s []string, w string) bool {
	for _, x := range s {
		if x == w {
			return true
		}
	}
	return false
}

// sqlPure are the words followed by "(" that call nothing that writes:
// the clauses, and the functions of a value.
var sqlPure = map[string]bool{
	"IN": true, "VALUES": true, "VALUE": true, "EXISTS": true, "ANY": true, "ALL": true, "SOME": true, "AND": true, "OR": true,
	"NOT": true, "ON": true, "USING": true, "WHERE": true, "SET": true, "AS": true, "SELECT": true, "FROM": true, "JOIN": true,
	"=": true, "<": true, ">": true, ",": true, "(": true, "+": true, "-": true, "*": true, "/": true, "%": true, "THEN": true,
	"ELSE": true, "WHEN": true, "CASE": true, "BY": true, "HAVING": true, "RETURNING": true, "DISTINCT": true, "OVER": true,
	"COUNT": true, "SUM": true, "MIN": true, "MAX": true, "AVG": true, "COALESCE": true, "NULLIF": true, "GREATEST": true,
	"LEAST": true, "ABS": true, "LOWER": true, "UPPER": true, "LENGTH": true, "CHAR_LENGTH": true, "SUBSTRING": true,
	"CONCAT": true, "CAST": true, "ROUND": true, "MOD": true, "IF": true, "IFNULL": true, "TRIM": true, "CONFLICT": true,
}

// sqlTableWord: a "(" after a table named here opens its column list,
// not a call (INSERT INTO t (id, value)).
var sqlTableWord = map[string]bool{"INTO": true}

// sqlListEnd ends a list of tables (FROM a, b): the clauses after it.
var sqlListEnd = map[string]bool{
	"WHERE": true, "SET": true, "GROUP": true, "ORDER": true, "LIMIT": true, "HAVING": true, "VALUES": true, "VALUE": true,
	"SELECT": true, "UNION": true, "INTERSECT": true, "EXCEPT": true, "RETURNING": true, "FOR": true, "WINDOW": true,
	"OFFSET": true, "FETCH": true, "DEFAULT": true, "LOCK": true,
}

// sqlTableModifier may stand between a word that names a table and the
// table: FROM ONLY t, JOIN LATERAL, INSERT LOW_PRIORITY IGNORE INTO t.
var sqlTableModifier = map[string]bool{
	"ONLY": true, "LATERAL": true, "IGNORE": true, "LOW_PRIORITY": true, "HIGH_PRIORITY": true, "DELAYED": true, "QUICK": true,
}

// sqlNotName are the words that never name a table where one is due.
var sqlNotName = map[string]bool{
	"WHERE": true, "SET": true, "GROUP": true, "ORDER": true, "LIMIT": true, "HAVING": true, "JOIN": true, "INNER": true,
	"LEFT": true, "RIGHT": true, "FULL": true, "CROSS": true, "NATURAL": true, "ON": true, "USING": true, "VALUES": true,
	"VALUE": true, "SELECT": true, "UNION": true, "RETURNING": true, "FOR": true, "WINDOW": true, "OFFSET": true, "FETCH": true,
	"DEFAULT": true, "FROM": true, "INTO": true, "STRAIGHT_JOIN": true,
}

// sqlTables are the tables a statement names: after FROM, JOIN, UPDATE,
// INTO and USING (and MySQL's INSERT t, REPLACE t, DELETE t FROM), and
// after each comma of a list of them, at every depth of parentheses. ok
// is false where a table is due and something else stands there (a
// parenthesized join, a name that starts with a digit, the end).
func sqlTables(toks []string) (tables []string, ok bool) {
	// need reads the table due at i; ok false when it is not one.
	need := func(i int) bool {
		for i < len(toks) && sqlTableModifier[toks[i]] {
			i++
		}
		switch {
		case i >= len(toks):
			return false
		case toks[i] == "(":
			// A subquery or a list of values: its own FROMs are read
			// where they stand.
			return i+1 < len(toks) && (toks[i+1] == "SELECT" || toks[i+1] == "VALUES")
		case !isName(toks[i]) || sqlNotName[toks[i]]:
			return false
		}
		tables = append(tables, tableName(toks[i]))
		return true
	}
	// In a list of tables, at each depth of parentheses.
	inList := []bool{false}
	if toks[0] == "INSERT" || toks[0] == "REPLACE" || toks[0] == "DELETE" {
		j := 1
		for j < len(toks) && sqlTableModifier[toks[j]] {
			j++
		}
		if j < len(toks) && toks[j] != "INTO" && toks[j] != "FROM" {
			// INSERT t …, DELETE t1, t2 FROM …
			if !need(j) {
				return nil, false
			}
			inList[0] = true
		}
	}
	for i, t := range toks {
		top := len(inList) - 1
		switch {
		case t == "(":
			inList = append(inList, false)
		case t == ")":
			if top > 0 {
				inList = inList[:top]
			}
		case t == "USING" && i+1 < len(toks) && toks[i+1] == "(":
			// JOIN … USING (column)
		case t == "UPDATE" && i+1 < len(toks) && toks[i+1] == "SET":
			// ON CONFLICT … DO UPDATE SET
		case t == "FROM" || t == "JOIN" || t == "STRAIGHT_JOIN" || t == "UPDATE" || t == "INTO" || t == "USING":
			if !need(i + 1) {
				return nil, false
			}
			inList[top] = true
		case t == "," && inList[top]:
			if !need(i + 1) {
				return nil, false
			}
		case sqlListEnd[t]:
			inList[top] = false
		}
	}
	return tables, true
}

func isName(t string) bool {
	c := t[0]
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c == '_' || c == '"' || c == '{' || c == '$' || c >= 0x80
}

// tableName is a table as one name: unquoted, lower case, without its
// schema (two schemas' tables of one name are taken as one: more
// conflicts, never fewer; the catalog is asked about every table of that
// name). A name with a quoted part is its last part already.
func tableName(t string) string {
	if strings.HasPrefix(t, `"`) {
		return t[1:]
	}
	return lastPart(strings.ToLower(t))
}

// KnownTables reads a setup's statements as server d reads them: the
// tables SetupTables names, each known apart.
func KnownTables(d Dialect, setup ...string) func(string) bool {
	known := map[string]bool{}
	for _, t := range SetupTables(d, setup...) {
		known[t] = true
	}
	return func(t string) bool { return known[t] }
}

// SetupTables reads a setup's statements as server d reads them: the
// tables they create, as tableName writes them ({{.runid}} in lower
// case), when nothing in them can make a statement on one table reach
// another (a trigger, a foreign key, a rule, a view, a function,
// inheritance or a partition). With any of those, or a statement the
// scanner is not certain of, none. A table created IF NOT EXISTS may
// have been there before, with any of those: the catalog is to be asked
// about each one after the setup ran (SQL.Known).
func SetupTables(d Dialect, setup ...string) []string {
	var toks []string
	for _, stmt := range setup {
		t, ok := sqlTokens(stmt, d)
		if !ok {
			return nil
		}
		toks = append(toks, t...)
	}
	var tables []string
	for i, t := range toks {
		switch t {
		case "TRIGGER", "REFERENCES", "FOREIGN", "RULE", "VIEW", "FUNCTION", "PROCEDURE", "INHERITS", "PARTITION", "EVENT", "POLICY":
			return nil
		case "TABLE":
			if i > 0 && toks[i-1] == "CREATE" {
				j := i + 1
				for j < len(toks) && (toks[j] == "IF" || toks[j] == "NOT" || toks[j] == "EXISTS") {
					j++
				}
				if j < len(toks) && isName(toks[j]) {
					tables = append(tables, tableName(toks[j]))
				}
			}
		}
	}
	return tables
}
