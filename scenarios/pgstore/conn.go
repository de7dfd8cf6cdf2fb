package pgstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/racetest/racetest/internal/sqldb"
)

// limits are the server's connection limits as the probe read them, for the
// too-many-connections message.
type limits struct {
	maxConnections int
	superReserved  int
	reserved       int // reserved_connections (PostgreSQL 16+), 0 before
	superuser      bool
	roleLimit      int // -1: none
	dbLimit        int // -1: none
	user, db       string
}

// connect dials one connection through the run's config (and so through
// Params.Dial when set) and counts it as held by the run.
func (t *target) connect(ctx context.Context) (*pgx.Conn, error) {
	c, err := pgx.ConnectConfig(ctx, t.cfg)
	if err != nil {
		return nil, t.explain(ctx, err)
	}
	t.open.Add(1)
	return c, nil
}

// release closes a connection the run held; c may already be closed.
func (t *target) release(c *pgx.Conn) {
	if c == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), sqldb.CloseTimeout)
	defer cancel()
	_ = c.Close(ctx)
	t.open.Add(-1)
}

// explain turns a failed connection attempt into one line naming the server,
// what went wrong and what to change. The password never appears: the
// message is built from the host, user, database and the server's SQLSTATE.
func (t *target) explain(ctx context.Context, err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case sqldb.CodeTooManyConnections:
			return t.tooMany(pe, err)
		case sqldb.CodeInvalidPassword, sqldb.CodeInvalidAuthorization:
			return &sqldb.ConnectError{Err: err, Msg: fmt.Sprintf(
				"postgres: %s refused user %q: %s (SQLSTATE %s) — check the user and password; %s",
				t.addr, t.cfg.User, pe.Message, pe.Code, hint)}
		case sqldb.CodeUnknownDatabase:
			return &sqldb.ConnectError{Err: err, Msg: fmt.Sprintf(
				"postgres: database %q does not exist on %s — create it (createdb %s) or name another; %s",
				t.cfg.Database, t.addr, t.cfg.Database, hint)}
		case sqldb.CodeInsufficientPrivs:
			return &sqldb.ConnectError{Err: err, Msg: fmt.Sprintf(
				"postgres: user %q may not connect to database %q on %s: %s — grant CONNECT or name another database; %s",
				t.cfg.User, t.cfg.Database, t.addr, pe.Message, hint)}
		case sqldb.CodeCannotConnectNow:
			return &sqldb.ConnectError{Err: err, Msg: fmt.Sprintf(
				"postgres: %s is not accepting connections yet (%s) — wait for it to finish starting and retry", t.addr, pe.Message)}
		}
		return &sqldb.ConnectError{Err: err, Msg: fmt.Sprintf(
			"postgres: %s refused the connection: %s (SQLSTATE %s); %s", t.addr, pe.Message, pe.Code, hint)}
	}
	if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &sqldb.ConnectError{Err: err, Msg: fmt.Sprintf("postgres: connecting to %s was interrupted", t.addr)}
	}
	return &sqldb.ConnectError{Err: err, Msg: fmt.Sprintf(
		"postgres: cannot connect to %s (%s) — is the server running? %s", t.addr, t.dialReason(err), hint)}
}

func (t *target) dialReason(err error) string {
	var dns *net.DNSError
	var op *net.OpError
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
		return "no answer within " + t.cfg.ConnectTimeout.String()
	case errors.As(err, &dns):
		return fmt.Sprintf("host %q not found", dns.Name)
	case errors.As(err, &op):
		return sqldb.RedactPostgres(op.Err.Error())
	}
	// The innermost error: ConnectError's own text repeats the config.
	for {
		next := errors.Unwrap(err)
		if next == nil {
			break
		}
		err = next
	}
	return sqldb.RedactPostgres(err.Error())
}

// tooMany is the one line for SQLSTATE 53300: which limit the server
// enforces, how many connections others hold, and what to change.
func (t *target) tooMany(pe *pgconn.PgError, err error) error {
	l := t.limits
	ours := t.open.Load()
	head := fmt.Sprintf("postgres: %s refused connection %d of this run: %s (SQLSTATE 53300)", t.addr, ours+1, pe.Message)
	others := t.otherClients(ours)
	fit := func(limit int) string {
		if others < 0 {
			return ""
		}
		// One connection is racetest's own, for setup and counting.
		return fmt.Sprintf(", at most %d attempts fit now", max(limit-others-1, 0))
	}
	held := ""
	if others >= 0 {
		held = fmt.Sprintf("; other clients hold %d", others)
	}
	var msg string
	switch {
	case strings.Contains(pe.Message, "for role"):
		msg = fmt.Sprintf("%s — user %q may hold at most %d connections (its CONNECTION LIMIT)%s — run fewer attempts%s, or ALTER ROLE %s CONNECTION LIMIT <n>",
			head, l.user, l.roleLimit, held, fit(l.roleLimit), pgx.Identifier{l.user}.Sanitize())
	case strings.Contains(pe.Message, "for database"):
		msg = fmt.Sprintf("%s — database %q accepts at most %d connections (its CONNECTION LIMIT)%s — run fewer attempts%s, or ALTER DATABASE %s CONNECTION LIMIT <n>",
			head, l.db, l.dbLimit, held, fit(l.dbLimit), pgx.Identifier{l.db}.Sanitize())
	case l.superuser:
		msg = fmt.Sprintf("%s — max_connections is %d (superuser %q may use all of them)%s — run fewer attempts%s, or raise max_connections in postgresql.conf and restart the server",
			head, l.maxConnections, l.user, held, fit(l.maxConnections))
	default:
		open := l.maxConnections - l.superReserved - l.reserved
		msg = fmt.Sprintf("%s — max_connections is %d minus %d reserved (superuser_reserved_connections%s), so %d are open to user %q%s — run fewer attempts%s, or raise max_connections in postgresql.conf and restart the server",
			head, l.maxConnections, l.superReserved+l.reserved, reservedNote(l.reserved), open, l.user, held, fit(open))
	}
	return &sqldb.ConnectError{Err: err, Msg: msg}
}

func reservedNote(reserved int) string {
	if reserved == 0 {
		return ""
	}
	return " + reserved_connections " + strconv.Itoa(reserved)
}

// otherClients counts the client connections that are not this run's, on
// the run's own setup connection (a new one would be refused too); -1 when
// that cannot be told.
func (t *target) otherClients(ours int64) int {
	if !t.mu.TryLock() {
		return -1
	}
	defer t.mu.Unlock()
	if t.admin == nil || t.admin.IsClosed() {
		return -1
	}
	ctx, cancel := context.WithTimeout(context.Background(), sqldb.CloseTimeout)
	defer cancel()
	var n int
	if err := t.admin.QueryRow(ctx, "SELECT count(*)::int FROM pg_stat_activity WHERE backend_type = 'client backend'").Scan(&n); err != nil {
		return -1
	}
	return max(n-int(ours), 0)
}
