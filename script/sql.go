package script

import (
	"fmt"
	"strings"

	"github.com/racetest/racetest/internal/sqldb"
)

// sqlLanguage is the SQL of PostgreSQL, MySQL and MariaDB, written as
// pgbench and psql read it.
var sqlLanguage = &language{
	id:       SQL,
	name:     "sql",
	unit:     "statements",
	split:    (*parser).sql,
	tx:       txOf,
	stmt:     func(e *Exec, text string) (Stmt, error) { return Stmt{Text: e.interpolate(text)}, nil },
	gset:     sqlGset,
	count:    sqlCount,
	refuse:   sqldb.CheckQuery,
	readOnly: sqlReadOnly,
}

// sql splits src into statements ending with ';' (outside quotes, comments
// and templates; the last may omit it) and backslash commands running to
// the end of their line.
func (p *parser) sql(src string) error {
	var stmt strings.Builder
	stmtLine, stmtCol := 0, 0
	line, col := 1, 1
	i := 0
	advance := func(n int) {
		for k := 0; k < n && i < len(src); k++ {
			if src[i] == '\n' {
				line, col = line+1, 1
			} else {
				col++
			}
			stmt.WriteByte(src[i])
			i++
		}
	}
	skip := func(n int) {
		for k := 0; k < n && i < len(src); k++ {
			if src[i] == '\n' {
				line, col = line+1, 1
			} else {
				col++
			}
			i++
		}
	}
	pending := func() bool { return strings.TrimSpace(stmt.String()) != "" }
	lastStmtLine := -1 // line on which the previous statement ended with ';'
	flush := func(gset bool, gsetName string) error {
		text := strings.TrimSpace(stmt.String())
		stmt.Reset()
		if text == "" {
			return nil
		}
		return p.addStatement(text, []string{text}, stmtLine, stmtCol, gset, gsetName)
	}
	for i < len(src) {
		c := src[i]
		if !pending() {
			stmt.Reset()
			if c == ' ' || c == '\t' || c == '\r' || c == '\n' {
				skip(1)
				continue
			}
			stmtLine, stmtCol = line, col
		}
		switch {
		case c == '\'' || c == '"' || c == '`':
			startLine, startCol := line, col
			advance(1)
			for {
				if i >= len(src) {
					return p.errf(startLine, startCol, "unterminated %c quote", c)
				}
				if src[i] == c {
					if i+1 < len(src) && src[i+1] == c { // doubled quote
						advance(2)
						continue
					}
					advance(1)
					break
				}
				if src[i] == '\\' && c == '\'' && i+1 < len(src) {
					// MySQL escapes, and PostgreSQL E'' strings; a
					// standard PostgreSQL string never has \' in it.
					advance(2)
					continue
				}
				advance(1)
			}
		case c == '-' && strings.HasPrefix(src[i:], "--"):
			for i < len(src) && src[i] != '\n' {
				skip(1)
			}
		case c == '/' && strings.HasPrefix(src[i:], "/*"):
			startLine, startCol := line, col
			end := strings.Index(src[i+2:], "*/")
			if end < 0 {
				return p.errf(startLine, startCol, "unterminated /* comment")
			}
			skip(end + 4)
			stmt.WriteByte(' ')
		case c == '$' && dollarTag(src[i:]) != "":
			tag := dollarTag(src[i:])
			startLine, startCol := line, col
			end := strings.Index(src[i+len(tag):], tag)
			if end < 0 {
				return p.errf(startLine, startCol, "unterminated %s quote", tag)
			}
			advance(len(tag) + end + len(tag))
		case c == '{' && strings.HasPrefix(src[i:], "{{"):
			startLine, startCol := line, col
			end := strings.Index(src[i:], "}}")
			if end < 0 {
				return p.errf(startLine, startCol, "unterminated template: {{ without }}")
			}
			advance(end + 2)
		case c == ';':
			advance(1)
			lastStmtLine = line
			if err := flush(false, ""); err != nil {
				return err
			}
			// The statement ended here: a \gset on the same line keeps
			// its values (psql would resend the query; we refuse to guess
			// otherwise).
		case c == '\\':
			mLine, mCol := line, col
			end := strings.IndexByte(src[i:], '\n')
			if end < 0 {
				end = len(src) - i
			}
			cmd := strings.TrimRight(src[i:i+end], " \t\r")
			skip(end)
			name, arg := splitMeta(cmd)
			if name == `\gset` {
				switch {
				case pending():
					if err := flush(true, arg); err != nil {
						return err
					}
				case lastStmtLine == mLine && len(p.s.Steps) > 0 && p.s.Steps[len(p.s.Steps)-1].Kind == Statement:
					st := &p.s.Steps[len(p.s.Steps)-1]
					st.Gset, st.GsetName = true, arg
				default:
					return p.errf(mLine, mCol, `\gset must follow a query: write SELECT … \gset (the \gset takes the place of the ';')`)
				}
				continue
			}
			if pending() {
				if !knownMeta(name) {
					// A typo after a query (\gsett) is a typo first: saying
					// the statement is unfinished sends the user looking at
					// the wrong line.
					return p.errf(mLine, mCol, "unknown meta-command %s%s — supported: %s", name, didYouMean(name), MetaCommands)
				}
				return p.errf(mLine, mCol, `%s inside an unfinished statement (begun at line %d) — end the statement with ';' first`, name, stmtLine)
			}
			if err := p.meta(name, arg, mLine, mCol); err != nil {
				return err
			}
		default:
			advance(1)
		}
	}
	// The last statement may go without its ';', as in psql -c 'SELECT 1'
	// or at the end of a psql or pgbench file: an inline --effects or
	// --subject is one statement, and nothing can follow it.
	if pending() {
		text := strings.TrimSpace(stmt.String())
		stmt.Reset()
		stmt.WriteString(text + ";")
		return flush(false, "")
	}
	return nil
}

// dollarTag returns the PostgreSQL dollar-quote tag s starts with ($$,
// $body$), or "".
func dollarTag(s string) string {
	for j := 1; j < len(s); j++ {
		c := s[j]
		if c == '$' {
			return s[:j+1]
		}
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || j > 1 && c >= '0' && c <= '9') {
			return ""
		}
	}
	return ""
}

// txOf reads how a statement moves the transaction state from its first
// words.
func txOf(text string) Tx {
	f := strings.Fields(strings.ToUpper(strings.TrimSuffix(text, ";")))
	if len(f) == 0 {
		return TxNone
	}
	switch f[0] {
	case "BEGIN":
		return TxBegin
	case "START":
		if len(f) > 1 && f[1] == "TRANSACTION" {
			return TxBegin
		}
	case "COMMIT", "END":
		return TxEnd
	case "ROLLBACK", "ABORT":
		for _, w := range f[1:] {
			if w == "TO" {
				return TxNone
			}
		}
		return TxEnd
	}
	return TxNone
}

// interpolate replaces :name, :'name' and :"name" outside quotes and
// comments by the variable's value, as a literal or an identifier for the
// quoted forms. A name that is not a variable stays as written (a ::cast,
// a :label), as in psql.
func (e *Exec) interpolate(s string) string {
	if !strings.Contains(s, ":") {
		return s
	}
	var b strings.Builder
	i := 0
	for i < len(s) {
		c := s[i]
		switch {
		case c == '\'' || c == '"' || c == '`':
			j := i + 1
			for j < len(s) {
				if s[j] == '\\' && c == '\'' {
					j += 2
					continue
				}
				if s[j] == c {
					if j+1 < len(s) && s[j+1] == c {
						j += 2
						continue
					}
					break
				}
				j++
			}
			j = min(j+1, len(s))
			b.WriteString(s[i:j])
			i = j
		case c == '-' && strings.HasPrefix(s[i:], "--"):
			j := strings.IndexByte(s[i:], '\n')
			if j < 0 {
				j = len(s) - i
			}
			b.WriteString(s[i : i+j])
			i += j
		case c == '$' && dollarTag(s[i:]) != "":
			tag := dollarTag(s[i:])
			j := strings.Index(s[i+len(tag):], tag)
			if j < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			end := i + len(tag) + j + len(tag)
			b.WriteString(s[i:end])
			i = end
		case c == ':' && i+1 < len(s) && s[i+1] != ':' && (i == 0 || s[i-1] != ':'):
			n, val, ok := e.variableAt(s[i+1:])
			if !ok {
				b.WriteByte(c)
				i++
				continue
			}
			b.WriteString(val)
			i += 1 + n
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String()
}

// variableAt reads name, 'name' or "name" at the start of s; it returns how
// many bytes it used and the text to put in its place.
func (e *Exec) variableAt(s string) (n int, val string, ok bool) {
	quote := byte(0)
	if s[0] == '\'' || s[0] == '"' {
		quote = s[0]
		end := strings.IndexByte(s[1:], quote)
		if end < 0 || !isIdent(s[1:1+end]) {
			return 0, "", false
		}
		v, ok := e.vars[s[1:1+end]]
		if !ok {
			return 0, "", false
		}
		if quote == '"' {
			return end + 2, `"` + strings.ReplaceAll(v, `"`, `""`) + `"`, true
		}
		if q, ok := e.conn.(Quoter); ok {
			return end + 2, q.QuoteLiteral(v), true
		}
		return end + 2, "'" + strings.ReplaceAll(v, "'", "''") + "'", true
	}
	j := 0
	for j < len(s) && (s[j] == '_' || s[j] >= 'a' && s[j] <= 'z' || s[j] >= 'A' && s[j] <= 'Z' || j > 0 && s[j] >= '0' && s[j] <= '9') {
		j++
	}
	if j == 0 {
		return 0, "", false
	}
	v, ok := e.vars[s[:j]]
	if !ok {
		return 0, "", false
	}
	return j, v, true
}

// sqlGset keeps the one row of a query, a variable per column.
func sqlGset(vars map[string]string, prefix string, r Reply) error {
	switch {
	case r.Rows == 0 || len(r.Values) == 0:
		return fmt.Errorf(`\gset: the query returned no row — \gset needs exactly one (use count(*) or coalesce to always return one)`)
	case r.Rows > 1:
		return fmt.Errorf(`\gset: the query returned %d rows — \gset needs exactly one (add WHERE or LIMIT 1)`, r.Rows)
	}
	for i, c := range r.Columns {
		name := prefix + c
		if !isIdent(name) {
			return fmt.Errorf(`\gset: column %q is not a variable name — name it with AS (SELECT count(*) AS used …)`, c)
		}
		vars[name] = r.Values[i]
	}
	return nil
}

// sqlReadOnly: a SELECT that locks nothing and writes nothing (no FOR
// UPDATE, no SELECT … INTO).
func sqlReadOnly(words []string) bool {
	text := " " + strings.Join(words, " ") + " "
	for _, lock := range []string{" FOR UPDATE", " FOR SHARE", " FOR NO KEY", " FOR KEY SHARE", " LOCK IN SHARE MODE", " INTO "} {
		if strings.Contains(text, lock) {
			return false
		}
	}
	return words[0] == "SELECT"
}

// sqlCount: the one value of the one row a check returns.
func sqlCount(r Reply) (string, int, bool, error) {
	if err := sqldb.OneValue(int(r.Rows), len(r.Columns)); err != nil {
		return "", 0, false, err
	}
	return firstValue(r), 0, false, nil
}
