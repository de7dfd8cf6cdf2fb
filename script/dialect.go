package script

import (
	"context"
	"fmt"
	"strings"

	"github.com/racetest/racetest/scenarios"
)

// Dialect is the language of a script's statements.
type Dialect uint8

const (
	// SQL: statements end with ';' (PostgreSQL, MySQL, MariaDB).
	SQL Dialect = iota
	// Redis: one command per line, its arguments split as redis-cli does.
	Redis
	// Mongo: database commands written as JSON documents.
	Mongo
)

// dialects are the backends scripts run on, in the order messages list
// them. Each is a value in its backend's own file: scripts on a new
// backend are that file and a line here (a new language also takes its
// Dialect constant above).
var dialects = []dialect{postgresDialect, mysqlDialect, redisDialect, mongoDialect}

// dialect is one backend as scripts see it: how to connect to it, and the
// language its scripts are written in. What a server's errors mean
// (Conn.Classify) and how it quotes a literal (Quoter) are its
// connections' own, beside them in the same file.
type dialect struct {
	backend string // the backend's name, as --backend gives it
	open    func(ctx context.Context, p scenarios.Params) (Store, error)
	lang    *language
}

// language is what a script language does its own way; several backends
// may share one (SQL on PostgreSQL and MySQL).
type language struct {
	id   Dialect // the language as cmd and suite name it
	name string  // as messages and commands write it: "sql"
	// unit names the language's statements in the banner: "statements".
	unit string
	// split reads src into statements (p.addStatement) and meta-commands
	// (p.meta).
	split func(p *parser, src string) error
	// tx reads how a statement (as written) moves the transaction state.
	tx func(text string) Tx
	// stmt puts the run's variables into a statement whose templates are
	// expanded, and says what is sent.
	stmt func(e *Exec, text string) (Stmt, error)
	// gset keeps a reply's values as variables, named by prefix.
	gset func(vars map[string]string, prefix string, r Reply) error
	// count reads an effects or invariant script's last reply: the value
	// to read as a count (or a boolean), or, when counted, the count
	// itself; an error says what the reply was when it is not exactly one
	// value ("returned 3 rows").
	count func(r Reply) (v string, n int, counted bool, err error)
	// refuse refuses, from its text, a check's statement that is not a
	// read (nil: the server judges, as Redis's COMMAND INFO does).
	refuse func(text string) error
	// readOnly reports whether a statement (its words, upper-cased) is a
	// plain read that locks nothing, so that two of them commute.
	readOnly func(words []string) bool
}

// lang is the language s is written in.
func (s *Script) lang() *language { return languageOf(s.Dialect) }

// languageOf is d's language; SQL's for a dialect that has none, as ever.
func languageOf(d Dialect) *language {
	for _, x := range dialects {
		if x.lang.id == d {
			return x.lang
		}
	}
	return dialects[0].lang
}

func (d Dialect) String() string { return languageOf(d).name }

// Backends lists the backends each dialect runs on.
var Backends = backendsOf(dialects)

func backendsOf(ds []dialect) map[Dialect][]string {
	m := map[Dialect][]string{}
	for _, x := range ds {
		m[x.lang.id] = append(m[x.lang.id], x.backend)
	}
	return m
}

// DialectOf is the dialect of backend's scripts.
func DialectOf(backend string) (Dialect, bool) {
	for _, x := range dialects {
		if x.backend == backend {
			return x.lang.id, true
		}
	}
	return 0, false
}

// Open connects to backend's server for a run with p.
func Open(ctx context.Context, backend string, p scenarios.Params) (Store, error) {
	for _, x := range dialects {
		if x.backend == backend {
			return x.open(ctx, p)
		}
	}
	return nil, scenarios.BadParam(fmt.Errorf("scripts run on %s, not %q", backendList(), backend))
}

// backendList is "postgres, mysql, redis or mongo".
func backendList() string {
	names := make([]string, len(dialects))
	for i, x := range dialects {
		names[i] = x.backend
	}
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// firstValue is a reply's first value, trimmed: a query's count.
func firstValue(r Reply) string {
	if len(r.Values) == 0 {
		return ""
	}
	return strings.TrimSpace(r.Values[0])
}
