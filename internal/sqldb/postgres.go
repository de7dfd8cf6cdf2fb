package sqldb

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/racetest/racetest/internal/sqldialect"
	"github.com/racetest/racetest/scenarios"
)

// SQLSTATE codes racetest reads. This is the one place they are written.
const (
	CodeUniqueViolation      = "23505"
	CodeDuplicateTable       = "42P07"
	CodeUndefinedTable       = "42P01"
	CodeSerializationFailure = "40001"
	CodeDeadlockDetected     = "40P01"
	CodeTooManyConnections   = "53300"
	CodeInvalidPassword      = "28P01"
	CodeInvalidAuthorization = "28000"
	CodeUnknownDatabase      = "3D000"
	CodeInsufficientPrivs    = "42501"
	CodeCannotConnectNow     = "57P03"
)

// DefaultPostgresURL is the server racetest talks to when --postgres-url and
// RACETEST_POSTGRES_URL are both empty: a local PostgreSQL on its standard
// port with trust authentication, as `docker compose up` starts it.
const DefaultPostgresURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// PostgresConnectTimeout bounds each connection attempt when the URL sets no
// connect_timeout, so that an unreachable server fails in seconds rather than
// after the operating system's TCP timeout. 3 s was too short for a loaded
// machine: at load 24 a local server, forking a backend per connection,
// took longer to answer a worker's connection, and a run failed.
const PostgresConnectTimeout = 10 * time.Second

// PostgresHint is the "what to change" half of a PostgreSQL connection error.
const PostgresHint = sqldialect.PostgresHint

// PostgresConfig parses a connection string (a postgres:// URL or
// keyword=value pairs; empty means DefaultPostgresURL) and applies what every
// racetest connection needs: one round trip per statement, a connect
// timeout, the dialer, an application_name and the isolation level. The
// returned config is a template: each connection uses a Copy. The error
// never contains the password.
func PostgresConfig(conn string, o Options) (*pgx.ConnConfig, error) {
	if conn == "" {
		conn = DefaultPostgresURL
	}
	cfg, err := pgx.ParseConfig(conn)
	if err != nil {
		// pgconn's ParseConfigError already hides the password; the message
		// is rebuilt anyway so that nothing but the redacted form is printed.
		// A connection string that cannot be parsed is bad input (exit 2),
		// not a server that failed.
		return nil, scenarios.BadParam(&ConnectError{
			Msg: fmt.Sprintf("postgres: cannot parse connection string %s — expected postgres://user@host:5432/database?sslmode=disable (%s)",
				RedactPostgres(conn), parseReason(err)),
			Err: err,
		})
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = PostgresConnectTimeout
	}
	if o.Dial != nil {
		// Every dial pgconn makes goes through DialFunc: the primary host,
		// each address LookupFunc resolves, the sslmode=prefer fallbacks and
		// the cancel-request connections. Hostname resolution itself stays
		// with LookupFunc; it opens no connection to the server.
		cfg.DialFunc = pgconn.DialFunc(o.Dial)
	}
	// One write and one round trip per statement: the extended protocol with
	// the unnamed statement (Parse, Bind, Describe, Execute, Sync in one
	// buffer). The default, QueryExecModeCacheStatement, prepares each new
	// statement text in a round trip of its own, which would sit between a
	// check and its write the first time, and would be what a last-byte
	// release holds back. Arguments still travel as parameters.
	cfg.DefaultQueryExecMode = pgx.QueryExecModeExec
	cfg.StatementCacheCapacity = 0
	cfg.DescriptionCacheCapacity = 0
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	if _, ok := cfg.RuntimeParams["application_name"]; !ok && o.AppName != "" {
		cfg.RuntimeParams["application_name"] = o.AppName
	}
	if o.Isolation != "" {
		lvl, err := ParseIsolation(string(o.Isolation))
		if err != nil {
			return nil, err
		}
		// Sent in the startup message, so it costs no round trip and
		// applies to single-statement attempts as well as to transactions.
		cfg.RuntimeParams["default_transaction_isolation"] = strings.ToLower(lvl.SQL())
	}
	return cfg, nil
}

func parseReason(err error) string {
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) && pe.Unwrap() != nil {
		return RedactPostgres(pe.Unwrap().Error())
	}
	return "not a valid URL or keyword=value list"
}

var (
	urlPassword = regexp.MustCompile(`(?i)(postgres(?:ql)?://[^:/@\s]*):[^@\s]*@`)
	kvPassword  = regexp.MustCompile(`(?i)(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s&]*)`)
)

// RedactPostgres returns conn with any password replaced by xxxxx, in either
// form pgx accepts: a URL (user:password@host, ?password=) or keyword=value
// pairs.
func RedactPostgres(conn string) string {
	if u, err := url.Parse(conn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
		q := u.Query()
		if q.Has("password") {
			q.Set("password", "xxxxx")
			u.RawQuery = q.Encode()
		}
		return u.String()
	}
	s := urlPassword.ReplaceAllString(conn, "${1}:xxxxx@")
	return kvPassword.ReplaceAllString(s, "${1}xxxxx")
}

// PostgresAddr names the server in messages: host:port, or the socket
// directory when the host is a unix socket (host=/var/run/postgresql).
func PostgresAddr(cfg *pgx.ConnConfig) string {
	if strings.HasPrefix(cfg.Host, "/") {
		return cfg.Host
	}
	return net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
}

// PostgresVersionQuery reads what PostgresServerName needs.
const PostgresVersionQuery = "SELECT version(), current_setting('server_version')"

// PostgresServerName is "PostgreSQL 15.20" for PostgreSQL, from version() and
// server_version, and the product as version() names it for a
// wire-compatible server.
func PostgresServerName(version, serverVersion string) string {
	if strings.HasPrefix(version, "PostgreSQL ") {
		if f := strings.Fields(serverVersion); len(f) > 0 {
			return "PostgreSQL " + f[0]
		}
	}
	if i := strings.IndexAny(version, "(,"); i > 0 {
		version = version[:i]
	}
	return strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(version), " on"))
}
