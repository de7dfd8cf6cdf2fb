package explore

import (
	"slices"
	"strings"
)

// Dialect is the SQL a server reads, as far as a footprint needs it: its
// quoting and its comments.
type Dialect string

const (
	// AnyDialect: the server is not known. A statement is read as each
	// server reads it, and where the two readings differ it is not
	// certain.
	AnyDialect Dialect = ""
	// Postgres: PostgreSQL.
	Postgres Dialect = "postgres"
	// MySQL: MySQL and MariaDB.
	MySQL Dialect = "mysql"
)

// sqlTokens splits a statement as server d reads it into upper-case words
// (a name with its {{.RunID}} is one word), names with a quoted part (one
// token: `"` and the last part, lower case) and single punctuation;
// strings are one "'" each, comments are left out. ok is false wherever
// the reading is not certain: an unterminated quote or comment, a string
// whose end depends on a server setting (backslash escapes:
// standard_conforming_strings, NO_BACKSLASH_ESCAPES; MySQL's "…" under
// ANSI_QUOTES), an executable comment or an optimizer hint (/*! */,
// /*M! */, /*+ */), a character the scanner does not know, a template
// other than {{.RunID}}, {{.Token}}, {{.Burst}} and {{.Attempt}}, or a
// second statement.
func sqlTokens(text string, d Dialect) ([]string, bool) {
	if d == AnyDialect {
		p, okp := sqlTokens(text, Postgres)
		m, okm := sqlTokens(text, MySQL)
		if !okp || !okm || !slices.Equal(p, m) {
			return nil, false
		}
		return p, true
	}
	text, ok := plainTemplates(text)
	if !ok {
		return nil, false
	}
	sc := sqlScanner{s: text, d: d}
	return sc.run()
}

// runIDTemplate stays in a name as a word's part; the other templates
// become what they expand to as far as the lexer can tell (a burst's
// token is "<run id>-<burst>").
const runIDTemplate = "{{.RunID}}"

var templateText = map[string]string{".RunID": runIDTemplate, ".Token": runIDTemplate + "-0", ".Burst": "0", ".Attempt": "0"}

// plainTemplates writes each template of text as the scanner reads it;
// false for any other template (an action can write a quote).
func plainTemplates(text string) (string, bool) {
	var b strings.Builder
	for {
		i := strings.Index(text, "{{")
		if i < 0 {
			b.WriteString(text)
			return b.String(), true
		}
		j := strings.Index(text[i:], "}}")
		if j < 0 {
			return "", false
		}
		t, ok := templateText[strings.TrimSpace(text[i+2:i+j])]
		if !ok {
			return "", false
		}
		b.WriteString(text[:i])
		b.WriteString(t)
		text = text[i+j+2:]
	}
}

type sqlScanner struct {
	s    string
	d    Dialect
	i    int
	toks []string
	// spans[k] is where toks[k] lies in s.
	spans [][2]int
	// multi: several statements, each ended by a ";" token, are read.
	multi bool
}

// Token is one token of Scan: its text as sqlTokens writes it (upper-case
// words, "'" for a string, `"name` for a quoted name, "?" for a
// PostgreSQL $n parameter, single punctuation) and where it lies in the
// statement's text.
type Token struct {
	Text       string
	Start, End int
}

// Scan reads text as server d reads it, for a reader of statements that
// arrive at run time (a wire proxy): like sqlTokens it skips strings and
// comments, and ok is false wherever the reading is not certain, but it
// reads several statements (each ";" is a token) and no templates ("{{"
// outside a string or comment is not certain).
func Scan(text string, d Dialect) (toks []Token, ok bool) {
	if d == AnyDialect {
		p, okp := Scan(text, Postgres)
		m, okm := Scan(text, MySQL)
		if !okp || !okm || !slices.EqualFunc(p, m, func(a, b Token) bool { return a == b }) {
			return nil, false
		}
		return p, true
	}
	sc := sqlScanner{s: text, d: d, multi: true}
	words, ok := sc.run()
	if !ok {
		return nil, false
	}
	toks = make([]Token, len(words))
	for k, w := range words {
		toks[k] = Token{Text: w, Start: sc.spans[k][0], End: sc.spans[k][1]}
	}
	return toks, true
}

func isSQLSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

// isIdentByte: a byte of an unquoted name on both servers (PostgreSQL's
// ident_cont, MySQL's [0-9a-zA-Z$_] and U+0080 up).
func isIdentByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '$' || c >= 0x80
}

func (sc *sqlScanner) run() ([]string, bool) {
	s := sc.s
	for sc.i < len(s) {
		c := s[sc.i]
		if !sc.multi && len(sc.toks) > 0 && sc.toks[len(sc.toks)-1] == ";" && !isSQLSpace(c) && !sc.comment() {
			return nil, false // a second statement
		}
		start := sc.i
		var ok bool
		switch {
		case isSQLSpace(c):
			sc.i++
			ok = true
		case sc.comment():
			ok = sc.skipComment()
		case c == '\'':
			ok = sc.str(false)
		case sc.quote(c):
			ok = sc.name()
		case c == '$' && sc.d == Postgres:
			ok = sc.dollar()
		case isIdentByte(c) || c == '.' || strings.HasPrefix(s[sc.i:], runIDTemplate):
			ok = sc.name()
		case strings.IndexByte("(),;=<>+-*/%|!&^~@:?[]", c) >= 0:
			sc.toks = append(sc.toks, string(c))
			sc.i++
			ok = true
		}
		if !ok {
			return nil, false
		}
		for len(sc.spans) < len(sc.toks) {
			sc.spans = append(sc.spans, [2]int{start, sc.i})
		}
	}
	return sc.toks, true
}

// comment reports a comment starting here: -- (MySQL: followed by a
// space, a control character or the end), # (MySQL), /*.
func (sc *sqlScanner) comment() bool {
	rest := sc.s[sc.i:]
	switch {
	case strings.HasPrefix(rest, "/*"):
		return true
	case strings.HasPrefix(rest, "--"):
		return sc.d == Postgres || len(rest) == 2 || rest[2] <= ' '
	case rest[0] == '#':
		return sc.d == MySQL
	}
	return false
}

func (sc *sqlScanner) skipComment() bool {
	s := sc.s
	if !strings.HasPrefix(s[sc.i:], "/*") {
		// To the end of the line: PostgreSQL ends it at \r too, MySQL
		// only at \n.
		for sc.i < len(s) && s[sc.i] != '\n' {
			if s[sc.i] == '\r' && (sc.i+1 == len(s) || s[sc.i+1] != '\n') {
				return false
			}
			sc.i++
		}
		return true
	}
	if sc.d == MySQL {
		rest := s[sc.i+2:]
		if strings.HasPrefix(rest, "!") || strings.HasPrefix(rest, "+") || strings.HasPrefix(rest, "M!") {
			return false // executed by the server, or a hint
		}
		end := strings.Index(rest, "*/")
		if end < 0 || strings.Contains(rest[:end], "/*") {
			return false // unterminated, or nested (which MySQL does not nest)
		}
		sc.i += 2 + end + 2
		return true
	}
	// PostgreSQL nests them.
	depth := 0
	for sc.i < len(s) {
		switch {
		case strings.HasPrefix(s[sc.i:], "/*"):
			depth++
			sc.i += 2
		case strings.HasPrefix(s[sc.i:], "*/"):
			depth--
			sc.i += 2
			if depth == 0 {
				return true
			}
		default:
			sc.i++
		}
	}
	return false
}

// quoteEnd is the index past the quote q that closes the quoted text
// opening at i, with a doubled q inside it, and a backslash escaping
// the next byte when escapes; -1 when it does not close.
func quoteEnd(s string, i int, q byte, escapes bool) int {
	for j := i + 1; j < len(s); j++ {
		switch {
		case escapes && s[j] == '\\':
			j++
		case s[j] == q && j+1 < len(s) && s[j+1] == q:
			j++
		case s[j] == q:
			return j + 1
		}
	}
	return -1
}

// str reads a string literal. escapes: PostgreSQL's E'…', where a
// backslash always escapes. Otherwise whether it does is the server's
// setting (standard_conforming_strings, NO_BACKSLASH_ESCAPES): the
// string must end at one place either way.
func (sc *sqlScanner) str(escapes bool) bool {
	end := quoteEnd(sc.s, sc.i, '\'', escapes)
	if !escapes && end != quoteEnd(sc.s, sc.i, '\'', true) {
		end = -1
	}
	if end < 0 {
		return false
	}
	sc.i = end
	sc.toks = append(sc.toks, "'")
	return true
}

// dollar reads PostgreSQL's $n parameter or a $tag$…$tag$ string.
func (sc *sqlScanner) dollar() bool {
	s := sc.s
	j := sc.i + 1
	if j < len(s) && s[j] >= '0' && s[j] <= '9' {
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		sc.toks = append(sc.toks, "?")
		sc.i = j
		return true
	}
	// A tag: a name's bytes up to the next $ (a digit first was a
	// parameter, above).
	for j < len(s) && isIdentByte(s[j]) && s[j] != '$' {
		j++
	}
	if j >= len(s) || s[j] != '$' {
		return false
	}
	tag := s[sc.i : j+1]
	end := strings.Index(s[j+1:], tag)
	if end < 0 {
		return false
	}
	sc.i = j + 1 + end + len(tag)
	sc.toks = append(sc.toks, "'")
	return true
}

// name reads a word (a keyword, an unquoted name, a number) or a name
// with quoted parts ("a"."b", `a`.`b`), joined by dots. MySQL's "…" is a
// string unless ANSI_QUOTES: it is read as a name, which in any place
// where a table may be named means the same or an error.
func (sc *sqlScanner) name() bool {
	s := sc.s
	start := sc.i
	quoted := false
	last := ""
	for {
		if sc.i < len(s) && sc.quote(s[sc.i]) {
			q := s[sc.i]
			end := quoteEnd(s, sc.i, q, false)
			if q == '"' && sc.d == MySQL && end != quoteEnd(s, sc.i, q, true) {
				return false // a string whose end is NO_BACKSLASH_ESCAPES's to say
			}
			if end < 0 {
				return false
			}
			quoted = true
			last = strings.ReplaceAll(s[sc.i+1:end-1], string([]byte{q, q}), string(q))
			sc.i = end
		} else {
			p := sc.i
			for sc.i < len(s) {
				if strings.HasPrefix(s[sc.i:], runIDTemplate) {
					sc.i += len(runIDTemplate)
					continue
				}
				if !isIdentByte(s[sc.i]) && s[sc.i] != '.' {
					break
				}
				sc.i++
			}
			last = lastPart(strings.ToLower(s[p:sc.i]))
			if strings.HasSuffix(s[p:sc.i], ".") && sc.i < len(s) && sc.quote(s[sc.i]) {
				continue // schema."table"
			}
		}
		if sc.i+1 < len(s) && s[sc.i] == '.' && (sc.quote(s[sc.i+1]) || isIdentByte(s[sc.i+1])) {
			sc.i++
			continue
		}
		break
	}
	word := s[start:sc.i]
	if word == "" {
		return false
	}
	if quoted {
		sc.toks = append(sc.toks, `"`+strings.ToLower(last))
		return true
	}
	digit := word[0] >= '0' && word[0] <= '9' || word[0] == '.'
	if digit && sc.d == Postgres && strings.Contains(word, "$") {
		return false // 1$…: a number, then a parameter or a dollar quote
	}
	star := sc.i < len(s) && s[sc.i] == '*' // t.*
	if strings.HasSuffix(word, ".") && !digit && !star || word[0] == '.' && (len(word) == 1 || word[1] < '0' || word[1] > '9') {
		return false // a dot between two names with space around it
	}
	if sc.d == Postgres && (word == "E" || word == "e") && sc.i < len(s) && s[sc.i] == '\'' {
		return sc.str(true) // E'…': backslash escapes
	}
	sc.toks = append(sc.toks, strings.ToUpper(word))
	return true
}

// quote reports a byte that opens a quoted name (or MySQL's "…").
func (sc *sqlScanner) quote(c byte) bool { return c == '"' || c == '`' && sc.d == MySQL }

// lastPart is the last of a lower-case run of dotted names
// ({{.runid}}'s dot is no part's end).
func lastPart(run string) string {
	const tmpl = "{{.runid}}"
	flat := strings.ReplaceAll(run, tmpl, "\x00")
	if k := strings.LastIndexByte(flat, '.'); k >= 0 {
		flat = flat[k+1:]
	}
	return strings.ReplaceAll(flat, "\x00", tmpl)
}
