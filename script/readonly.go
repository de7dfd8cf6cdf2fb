package script

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/racetest/racetest/internal/mongodb"
	"github.com/racetest/racetest/internal/redisdb"
	"github.com/racetest/racetest/internal/sqldb"
	"github.com/racetest/racetest/runner"
)

// Checks (the effects script, the invariants) only read. Three guards, each
// before anything it guards runs:
//
//   - Load refuses, from its text, a check's statement that is not a
//     query (SQL: its first word; MongoDB: its command): before anything
//     connects.
//   - Prepare asks the server which of the checks' Redis commands only
//     read (COMMAND INFO), before the setup runs.
//   - Each run of a check goes through its store's Reader: SQL inside a
//     read-only transaction ended by ROLLBACK, whose refusal of a write
//     (PostgreSQL 25006, MySQL 1792) is named as such; every statement is
//     judged again once its templates and variables are in, before it is
//     sent.
//
// A refusal is the script's own error: exit 2.

// refuseWrites refuses a check's statement that its language can tell,
// from its text, is not a read. Templates are expanded with sample values;
// a statement whose text they change is judged again when it runs.
func refuseWrites(s *Script, scope Scope) error {
	refuse := s.lang().refuse
	if refuse == nil {
		return nil
	}
	for i := range s.Steps {
		st := &s.Steps[i]
		if st.Kind != Statement {
			continue
		}
		text, ok := st.sampleText(scope)
		if !ok {
			continue
		}
		if err := refuse(text); err != nil {
			return &StatementError{Pos: st.Pos, Text: st.Text, Err: err, Schema: true}
		}
	}
	return nil
}

// sampleText is the statement with sample template values; false when
// they do not expand.
func (st *Step) sampleText(scope Scope) (string, bool) {
	pc := st.parts[0]
	if pc.tmpl == nil {
		return pc.raw, true
	}
	var b strings.Builder
	if err := pc.tmpl.Execute(&b, sample(scope)); err != nil {
		return "", false
	}
	return b.String(), true
}

// preflighter is a store whose server judges, before the run, whether a
// check's statements only read (Redis: COMMAND INFO).
type preflighter interface {
	preflight(ctx context.Context, s *Script) error
}

// readConn runs a check's statements on a store's Reader: each is judged
// by its language before it is sent, and a write the server refused in the
// read-only transaction is named as one.
type readConn struct {
	Conn
	refuse func(text string) error
}

func (c readConn) Exec(ctx context.Context, st Stmt) (Reply, error) {
	if c.refuse != nil && st.Text != "" {
		if err := c.refuse(st.Text); err != nil {
			return Reply{}, err
		}
	}
	r, err := c.Conn.Exec(ctx, st)
	if err != nil && sqldb.IsReadOnlyRefusal(err) {
		return Reply{}, &sqldb.WriteError{Err: err}
	}
	return r, err
}

// Classify: a write refused is the script's own error.
func (c readConn) Classify(err error) (runner.Class, bool) {
	if isWriteRefused(err) {
		return runner.Error, true
	}
	return c.Conn.Classify(err)
}

// isWriteRefused reports a check that was refused because it would write.
func isWriteRefused(err error) bool {
	var se *sqldb.WriteError
	var re *redisdb.WriteError
	var me *mongodb.WriteError
	return errors.As(err, &se) || errors.As(err, &re) || errors.As(err, &me)
}

// read runs a check on the store's Reader and returns its last reply.
func (t *Target) read(ctx context.Context, s *Script, d Data) (Reply, error) {
	t.admin.Lock()
	defer t.admin.Unlock()
	ctx, cancel := context.WithTimeout(ctx, adminTimeout)
	defer cancel()
	c, end, err := t.store.Reader(ctx)
	if err != nil {
		return Reply{}, err
	}
	defer end()
	e := s.Start(readConn{Conn: c, refuse: s.lang().refuse}, d, nil)
	e.QueryLast()
	o := e.Run(ctx, nil)
	if o.Class != runner.Executed {
		if o.Err == nil {
			o.Err = errors.New(o.Class.String())
		}
		return Reply{}, o.Err
	}
	return e.Last(), nil
}

// preflight has the server judge the checks' statements before the setup
// runs (Redis); other stores judged them at Load.
func (t *Target) preflight(ctx context.Context) error {
	p, ok := t.store.(preflighter)
	if !ok {
		return nil
	}
	checks := []struct {
		what string
		s    *Script
	}{{"--effects", t.sc.Effects}}
	for _, inv := range t.sc.Invariants {
		checks = append(checks, struct {
			what string
			s    *Script
		}{"--invariant", inv})
	}
	for _, c := range checks {
		if c.s == nil {
			continue
		}
		if err := p.preflight(ctx, c.s); err != nil {
			return runError(c.what+" (nothing ran: not the setup, not a burst)", err)
		}
	}
	return nil
}

// oneValueError is a check whose last statement did not return exactly
// one value.
func (t *Target) oneValueError(sc *Script, what string, err error) error {
	last := sc.lastStatement()
	return &RunError{What: what, Script: true, Err: &ScriptError{Pos: last.Pos, Text: last.Text,
		Msg: fmt.Sprintf("the %s script's last statement %v", strings.TrimPrefix(what, "--"), err)}}
}
