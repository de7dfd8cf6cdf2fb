package mysqlstore

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// DefaultDSN is the server racetest talks to when --mysql-dsn and
// RACETEST_MYSQL_DSN are both empty: a local MySQL or MariaDB on its
// standard port, as `docker compose up` starts it.
const DefaultDSN = "root@tcp(127.0.0.1:3306)/test"

// DialTimeout bounds the TCP dial, so that an unreachable server fails in
// seconds rather than after the operating system's connect timeout.
const DialTimeout = 3 * time.Second

// Config parses a connection string in either form the command line
// accepts — the driver's DSN (user:pass@tcp(host:3306)/db?params) or a URL
// (mysql://user:pass@host:3306/db?params) — and applies the settings every
// racetest connection needs. Empty means DefaultDSN. Errors never contain the
// password.
func Config(conn string) (*mysql.Config, error) {
	if conn == "" {
		conn = DefaultDSN
	}
	var cfg *mysql.Config
	var err error
	if isURL(conn) {
		cfg, err = configFromURL(conn)
	} else {
		cfg, err = mysql.ParseDSN(conn)
		if err != nil {
			err = fmt.Errorf("mysql: cannot parse DSN %s: %w — expected user:password@tcp(host:3306)/database or mysql://user:password@host:3306/database", Redact(conn), err)
		}
	}
	if err != nil {
		return nil, err
	}
	// Time columns (lock_until, granted_at) come back as time.Time.
	cfg.ParseTime = true
	// RowsAffected must count changed rows, not matched ones (db-semantics
	// trap 4): a conditional update that matched nothing new is a refusal.
	cfg.ClientFoundRows = false
	// One round trip per statement: without it the driver prepares, executes
	// and closes a statement for every call with arguments, and the extra
	// prepare round trip would sit between the check and the write (and be
	// what a last-byte release holds back). Arguments are still escaped by
	// the driver, never spliced from user text.
	cfg.InterpolateParams = true
	// The driver would log every broken connection to stderr as well as
	// return it; racetest reports errors itself, once.
	cfg.Logger = quietLogger{}
	if cfg.Timeout == 0 {
		cfg.Timeout = DialTimeout
	}
	if cfg.DBName == "" {
		return nil, fmt.Errorf("mysql: no database named in %s — racetest creates its tables in one database: add it, e.g. %s", Redact(conn), DefaultDSN)
	}
	return cfg, nil
}

func isURL(s string) bool {
	ls := strings.ToLower(s)
	return strings.HasPrefix(ls, "mysql://") || strings.HasPrefix(ls, "mariadb://")
}

// configFromURL converts mysql://user:pass@host:port/db?params to a driver
// Config. Query parameters are the driver's own DSN parameters.
func configFromURL(s string) (*mysql.Config, error) {
	u, err := url.Parse(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error repeats the whole URL, password included
		}
		return nil, fmt.Errorf("mysql: cannot parse URL %s: %w", Redact(s), err)
	}
	// The driver parses its own parameters from a DSN with only a query,
	// so that every parameter it knows means the same in both forms.
	cfg, err := mysql.ParseDSN("/?" + u.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("mysql: bad parameter in URL %s: %w", Redact(s), err)
	}
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	cfg.Net = "tcp"
	host, port := u.Hostname(), u.Port()
	if host == "" {
		host = "127.0.0.1"
	}
	if port == "" {
		port = "3306"
	}
	cfg.Addr = net.JoinHostPort(host, port)
	cfg.DBName = strings.TrimPrefix(u.Path, "/")
	return cfg, nil
}

// Redact returns conn with its password replaced, in either form Config
// accepts, so that it can be shown in errors and reports.
func Redact(conn string) string {
	if isURL(conn) {
		if u, err := url.Parse(conn); err == nil {
			return u.Redacted()
		}
		// Unparseable: hide everything between the user name and the last
		// '@', which is where a password would be.
		rest := conn[strings.Index(conn, "://")+3:]
		at := strings.LastIndexByte(rest, '@')
		if at < 0 {
			return conn
		}
		user, _, _ := strings.Cut(rest[:at], ":")
		return conn[:len(conn)-len(rest)] + user + ":xxxxx" + rest[at:]
	}
	// The driver's own parse: the last '/' ends the address part, the last
	// '@' before it ends the credentials, the first ':' starts the password.
	slash := strings.LastIndexByte(conn, '/')
	if slash < 0 {
		slash = len(conn)
	}
	at := strings.LastIndexByte(conn[:slash], '@')
	if at < 0 {
		return conn
	}
	colon := strings.IndexByte(conn[:at], ':')
	if colon < 0 {
		return conn
	}
	return conn[:colon+1] + "xxxxx" + conn[at:]
}

// describeAddr names the server in messages: host:port, never credentials.
func describeAddr(cfg *mysql.Config) string {
	if cfg.Net == "unix" {
		return "unix socket " + cfg.Addr
	}
	return cfg.Addr
}

type quietLogger struct{}

func (quietLogger) Print(...any) {}
