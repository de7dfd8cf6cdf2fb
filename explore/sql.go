package explore

import (
	"strings"
	"unicode"
)

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

// Footprint is what the statement text touches.
func (s SQL) Footprint(text string) Footprint {
	toks := sqlTokens(text)
	if len(toks) == 0 {
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
	// A plain read at read committed or below takes no lock and holds
	// nothing: its transaction's end owes it nothing.
	f := Footprint{Fleeting: !write}
	if write {
		f.Accesses = append(f.Accesses, locks)
	}
	for _, table := range sqlTables(toks) {
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
	"CONCAT": true, "CAST": true, "ROUND": true, "MOD": true, "IF": true, "IFNULL": true, "TRIM": true,
}

// sqlTableWord: a "(" after a table named here opens its column list,
// not a call (INSERT INTO t (id, value)).
var sqlTableWord = map[string]bool{"INTO": true}

// sqlClause ends a list of tables.
var sqlClause = map[string]bool{
	"WHERE": true, "SET": true, "GROUP": true, "ORDER": true, "LIMIT": true, "HAVING": true, "JOIN": true, "INNER": true,
	"LEFT": true, "RIGHT": true, "FULL": true, "CROSS": true, "NATURAL": true, "ON": true, "USING": true, "VALUES": true,
	"VALUE": true, "SELECT": true, "UNION": true, "RETURNING": true, "FOR": true, "WINDOW": true, "OFFSET": true, "FETCH": true,
	"(": true, ")": true, ";": true, "DEFAULT": true, "ORDER BY": true,
}

// sqlTables are the tables a statement names: after FROM, JOIN, UPDATE,
// INTO and USING, and after each comma of a list of them.
func sqlTables(toks []string) []string {
	var out []string
	add := func(i int) int {
		for i < len(toks) && (toks[i] == "ONLY" || toks[i] == "LATERAL" || toks[i] == "IGNORE" || toks[i] == "LOW_PRIORITY") {
			i++
		}
		if i >= len(toks) || !isName(toks[i]) || sqlClause[toks[i]] {
			return i
		}
		out = append(out, tableName(toks[i]))
		return i + 1
	}
	for i := 0; i < len(toks); i++ {
		switch toks[i] {
		case "FROM", "JOIN", "UPDATE", "INTO", "USING":
			j := add(i + 1)
			// A list: "FROM a x, b y".
			for j < len(toks) && !sqlClause[toks[j]] {
				if toks[j] == "," {
					j = add(j + 1)
					continue
				}
				j++
			}
			i = j - 1
		}
	}
	return out
}

func isName(t string) bool {
	r := []rune(t)
	return len(r) > 0 && (unicode.IsLetter(r[0]) || r[0] == '_' || r[0] == '`' || r[0] == '"' || r[0] == '{')
}

// tableName is a table as one name: unquoted, lower case, without its
// schema (two schemas' tables of one name are taken as one: more
// conflicts, never fewer).
func tableName(t string) string {
	t = strings.NewReplacer("`", "", `"`, "").Replace(t)
	if i := strings.LastIndex(t, "."); i >= 0 && !strings.Contains(t[i:], "}}") {
		t = t[i+1:]
	}
	return strings.ToLower(t)
}

// sqlTokens splits a statement into upper-case words (a name with its
// template parts, {{.RunID}}, is one word) and single punctuation; string
// literals and comments are left out.
func sqlTokens(text string) []string {
	var out []string
	r := []rune(text)
	for i := 0; i < len(r); {
		c := r[i]
		switch {
		case unicode.IsSpace(c):
			i++
		case c == '\'':
			for i++; i < len(r) && r[i] != '\''; i++ {
			}
			i++
			out = append(out, "'")
		case c == '-' && i+1 < len(r) && r[i+1] == '-':
			for i < len(r) && r[i] != '\n' {
				i++
			}
		case strings.ContainsRune("(),;=<>+-*/%|!", c):
			out = append(out, string(c))
			i++
		default:
			j := i
			for j < len(r) && !unicode.IsSpace(r[j]) && !strings.ContainsRune("(),;=<>+-*/%|!'", r[j]) {
				j++
			}
			out = append(out, strings.ToUpper(string(r[i:j])))
			i = j
		}
	}
	return out
}

// KnownTables reads a setup script: the tables it creates, when nothing
// in it can make a statement on one table reach another (a trigger, a
// foreign key, a rule, a view, a function, inheritance or a partition).
// With any of those, no table is known apart.
func KnownTables(setup string) func(string) bool {
	toks := sqlTokens(setup)
	known := map[string]bool{}
	for i, t := range toks {
		switch t {
		case "TRIGGER", "REFERENCES", "FOREIGN", "RULE", "VIEW", "FUNCTION", "PROCEDURE", "INHERITS", "PARTITION", "EVENT", "POLICY":
			return func(string) bool { return false }
		case "TABLE":
			if i > 0 && toks[i-1] == "CREATE" {
				j := i + 1
				for j < len(toks) && (toks[j] == "IF" || toks[j] == "NOT" || toks[j] == "EXISTS") {
					j++
				}
				if j < len(toks) && isName(toks[j]) {
					known[tableName(toks[j])] = true
				}
			}
		}
	}
	return func(t string) bool { return known[t] }
}
