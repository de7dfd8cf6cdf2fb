package pgstore

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/racetest/racetest/scenarios"
)

// Name is the backend's name on the command line.
const Name = "postgres"

// DefaultURL is the server racetest talks to when --postgres-url and
// RACETEST_POSTGRES_URL are both empty: a local PostgreSQL on its standard
// port with trust authentication, as `docker compose up` starts it.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// ConnectTimeout bounds each connection attempt when the URL sets no
// connect_timeout, so that an unreachable server fails in seconds rather than
// after the operating system's TCP timeout.
const ConnectTimeout = 3 * time.Second

// hint is the "what to change" half of every connection error.
const hint = "set --postgres-url or RACETEST_POSTGRES_URL"

// Register adds the PostgreSQL backend and its five core scenarios to r.
func Register(r *scenarios.Registry) {
	r.AddBackend(scenarios.Backend{
		Name:    Name,
		Summary: "PostgreSQL through pgx v5 (--postgres-url, default " + DefaultURL + ")",
		Server:  true,
	})
	for _, sc := range catalog() {
		r.Register(sc.name, Name, factory(sc))
	}
}

// isolations maps the --isolation values to the levels pgx names.
// PostgreSQL accepts READ UNCOMMITTED and runs it as READ COMMITTED.
var isolations = map[string]pgx.TxIsoLevel{
	"read-uncommitted": pgx.ReadUncommitted,
	"read-committed":   pgx.ReadCommitted,
	"repeatable-read":  pgx.RepeatableRead,
	"serializable":     pgx.Serializable,
}

// Config parses a connection string (a postgres:// URL or keyword=value
// pairs; empty means DefaultURL) and applies what every racetest connection
// needs. The returned config is a template: each connection uses a Copy.
func Config(conn string, p scenarios.Params) (*pgx.ConnConfig, error) {
	if conn == "" {
		conn = DefaultURL
	}
	cfg, err := pgx.ParseConfig(conn)
	if err != nil {
		// pgconn's ParseConfigError already hides the password; the message
		// is rebuilt anyway so that nothing but the redacted form is printed.
		return nil, &connError{
			msg: fmt.Sprintf("postgres: cannot parse connection string %s — expected postgres://user@host:5432/database?sslmode=disable (%s)",
				Redact(conn), parseReason(err)),
			err: err,
		}
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = ConnectTimeout
	}
	if p.Dial != nil {
		// Every dial pgconn makes goes through DialFunc: the primary host,
		// each address LookupFunc resolves, the sslmode=prefer fallbacks and
		// the cancel-request connections. Hostname resolution itself stays
		// with LookupFunc; it opens no connection to the server.
		cfg.DialFunc = pgconn.DialFunc(p.Dial)
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
	if _, ok := cfg.RuntimeParams["application_name"]; !ok {
		cfg.RuntimeParams["application_name"] = "racetest " + p.RunID
	}
	if p.Isolation != "" {
		lvl, ok := isolations[p.Isolation]
		if !ok {
			return nil, scenarios.BadParam(fmt.Errorf("postgres: unknown isolation level %q — use read-committed, repeatable-read, serializable or read-uncommitted (or leave it empty for the server default)", p.Isolation))
		}
		// Sent in the startup message, so it costs no round trip and
		// applies to single-statement attempts as well as to transactions.
		cfg.RuntimeParams["default_transaction_isolation"] = string(lvl)
	}
	return cfg, nil
}

func parseReason(err error) string {
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) && pe.Unwrap() != nil {
		return Redact(pe.Unwrap().Error())
	}
	return "not a valid URL or keyword=value list"
}

var (
	urlPassword = regexp.MustCompile(`(?i)(postgres(?:ql)?://[^:/@\s]*):[^@\s]*@`)
	kvPassword  = regexp.MustCompile(`(?i)(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s&]*)`)
)

// Redact returns conn with any password replaced by xxxxx, in either form
// pgx accepts: a URL (user:password@host, ?password=) or keyword=value pairs.
func Redact(conn string) string {
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
