package sqldb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/racetest/racetest/internal/sqldialect"
	"github.com/racetest/racetest/scenarios"
)

// Server error numbers racetest reads. SQLState is often empty on errors
// raised at the handshake (1040 came back without one in 14 of 15 cases), so
// the number is what decides. This is the one place they are written.
const (
	ErrDupEntry          = 1062 // ER_DUP_ENTRY: the unique key refused the row
	ErrLockDeadlock      = 1213 // ER_LOCK_DEADLOCK: InnoDB chose this transaction as the victim
	ErrCheckRead         = 1020 // ER_CHECKREAD: record changed since last read (MariaDB snapshot isolation)
	ErrLockWaitTimeout   = 1205 // ER_LOCK_WAIT_TIMEOUT
	ErrConCount          = 1040 // ER_CON_COUNT_ERROR: too many connections
	ErrTooManyUserConns  = 1203 // ER_TOO_MANY_USER_CONNECTIONS: @@max_user_connections
	ErrUserLimitReached  = 1226 // ER_USER_LIMIT_REACHED: the account's MAX_USER_CONNECTIONS
	ErrAccessDenied      = 1045 // ER_ACCESS_DENIED_ERROR
	ErrDBAccessDenied    = 1044 // ER_DBACCESS_DENIED_ERROR
	ErrBadDB             = 1049 // ER_BAD_DB_ERROR: unknown database
	ErrTableExists       = 1050 // ER_TABLE_EXISTS_ERROR
	ErrDataTooLong       = 1406 // ER_DATA_TOO_LONG (strict mode)
	ErrNoSuchTable       = 1146 // ER_NO_SUCH_TABLE
	ErrUnknownSystemVar  = 1193 // ER_UNKNOWN_SYSTEM_VARIABLE
	ErrUnknownStorageEng = 1286 // ER_UNKNOWN_STORAGE_ENGINE

	// A server that cannot serve the statement now, whatever it says.
	ErrServerShutdown     = 1053 // ER_SERVER_SHUTDOWN
	ErrNormalShutdown     = 1077 // ER_NORMAL_SHUTDOWN
	ErrAbortingConnection = 1152 // ER_ABORTING_CONNECTION
	ErrQueryInterrupted   = 1317 // ER_QUERY_INTERRUPTED: KILL QUERY, or a shutdown
	ErrQueryTimeout       = 3024 // ER_QUERY_TIMEOUT: max_execution_time ran out (MySQL)

	// ErrClientMin (CR_MIN_ERROR) is where the client library's error
	// numbers start; the server's below it are about the statement (its
	// newer ones, from 3000, are not read as such).
	ErrClientMin = 2000

	// sqlStateSerialization is the standard SQLSTATE of a serialization
	// failure, which some MySQL-protocol servers send with other numbers.
	sqlStateSerialization = "40001"
)

// DefaultMySQLDSN is the server racetest talks to when --mysql-dsn and
// RACETEST_MYSQL_DSN are both empty: a local MySQL or MariaDB on its
// standard port, as `docker compose up` starts it.
const DefaultMySQLDSN = "root@tcp(127.0.0.1:3306)/test"

// MySQLDialTimeout bounds the TCP dial, so that an unreachable server fails
// in seconds rather than after the operating system's connect timeout.
const MySQLDialTimeout = 3 * time.Second

// MySQLHint is the "what to change" half of a MySQL connection error.
const MySQLHint = sqldialect.MySQLHint

// MySQLConfig parses a connection string in either form the command line
// accepts — the driver's DSN (user:pass@tcp(host:3306)/db?params) or a URL
// (mysql://user:pass@host:3306/db?params) — and applies the settings every
// racetest connection needs. Empty means DefaultMySQLDSN. Errors never
// contain the password.
func MySQLConfig(conn string) (*mysql.Config, error) {
	if conn == "" {
		conn = DefaultMySQLDSN
	}
	var cfg *mysql.Config
	var err error
	if isMySQLURL(conn) {
		cfg, err = mysqlConfigFromURL(conn)
	} else {
		cfg, err = mysql.ParseDSN(conn)
		if err != nil {
			err = fmt.Errorf("mysql: cannot parse DSN %s: %w — expected user:password@tcp(host:3306)/database or mysql://user:password@host:3306/database", RedactMySQL(conn), err)
		}
	}
	if err != nil {
		// A DSN that cannot be parsed is bad input (exit 2), not a server
		// that failed.
		return nil, scenarios.BadParam(err)
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
	// One statement per request, whatever the DSN asks: a check runs in a
	// read-only transaction that a second statement of the same request
	// could end (SELECT 1; COMMIT; DELETE …).
	cfg.MultiStatements = false
	// The driver would log every broken connection to stderr as well as
	// return it; racetest reports errors itself, once.
	cfg.Logger = quietLogger{}
	if cfg.Timeout == 0 {
		cfg.Timeout = MySQLDialTimeout
	}
	if cfg.DBName == "" {
		return nil, scenarios.BadParam(fmt.Errorf("mysql: no database named in %s — racetest creates its tables in one database: add it, e.g. %s", RedactMySQL(conn), DefaultMySQLDSN))
	}
	return cfg, nil
}

func isMySQLURL(s string) bool {
	ls := strings.ToLower(s)
	return strings.HasPrefix(ls, "mysql://") || strings.HasPrefix(ls, "mariadb://")
}

// mysqlConfigFromURL converts mysql://user:pass@host:port/db?params to a
// driver Config. Query parameters are the driver's own DSN parameters.
func mysqlConfigFromURL(s string) (*mysql.Config, error) {
	u, err := url.Parse(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error repeats the whole URL, password included
		}
		return nil, fmt.Errorf("mysql: cannot parse URL %s: %w", RedactMySQL(s), err)
	}
	// The driver parses its own parameters from a DSN with only a query,
	// so that every parameter it knows means the same in both forms.
	cfg, err := mysql.ParseDSN("/?" + u.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("mysql: bad parameter in URL %s: %w", RedactMySQL(s), err)
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

// RedactMySQL returns conn with its password replaced, in either form
// MySQLConfig accepts, so that it can be shown in errors and reports.
func RedactMySQL(conn string) string {
	if isMySQLURL(conn) {
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

// MySQLAddr names the server in messages: host:port or the unix socket,
// never credentials.
func MySQLAddr(cfg *mysql.Config) string {
	if cfg.Net == "unix" {
		return "unix socket " + cfg.Addr
	}
	return cfg.Addr
}

type quietLogger struct{}

func (quietLogger) Print(...any) {}

// ServerInfo is what a MySQL-protocol server says it is.
type ServerInfo struct {
	Product string // "MariaDB", "MySQL", "TiDB"
	Version string // "10.11.19"
	Raw     string // VERSION() as reported: "10.11.19-MariaDB-0+deb12u1"
}

func (s ServerInfo) String() string { return s.Product + " " + s.Version }

// IsMariaDB reports whether the server is MariaDB, whose SQL differs from
// MySQL 8's in places (PERSISTENT generated columns, tx_isolation).
func (s ServerInfo) IsMariaDB() bool { return s.Product == "MariaDB" }

// StoredColumn is the keyword for a generated column kept in the row, which
// a unique key can cover: PERSISTENT on MariaDB, STORED on MySQL.
func (s ServerInfo) StoredColumn() string {
	if s.IsMariaDB() {
		return "PERSISTENT"
	}
	return "STORED"
}

var leadingVersion = regexp.MustCompile(`^[0-9]+(\.[0-9]+)*`)

// ParseMySQLVersion reads SELECT VERSION()'s answer.
func ParseMySQLVersion(raw string) ServerInfo {
	// MariaDB before 11 sent "5.5.5-" in the handshake for old clients;
	// strip it should a proxy pass it through.
	v := strings.TrimPrefix(raw, "5.5.5-")
	info := ServerInfo{Product: "MySQL", Version: leadingVersion.FindString(v), Raw: raw}
	lower := strings.ToLower(v)
	switch {
	case strings.Contains(lower, "mariadb"):
		info.Product = "MariaDB"
	case strings.Contains(lower, "-tidb-"):
		info.Product = "TiDB"
		if _, after, ok := strings.Cut(v, "-TiDB-v"); ok {
			info.Version = leadingVersion.FindString(after)
		}
	}
	if info.Version == "" {
		info.Version = v
	}
	return info
}

// MySQLIsolation reads the session's isolation level ("REPEATABLE-READ").
// MySQL 8 knows only transaction_isolation, MariaDB 10.11 only tx_isolation
// (db-semantics trap 7): it tries one, then the other.
func MySQLIsolation(ctx context.Context, q Querier) (string, error) {
	var level string
	err := q.QueryRow(ctx, "SELECT @@SESSION.transaction_isolation").Scan(&level)
	if MySQLNumber(err) == ErrUnknownSystemVar {
		err = q.QueryRow(ctx, "SELECT @@SESSION.tx_isolation").Scan(&level)
	}
	if err != nil {
		return "", fmt.Errorf("mysql: reading the isolation level: %w", err)
	}
	return level, nil
}

// MySQLEngineOf reads the storage engine the server used for table, and
// whether that engine supports transactions. A server without the engine
// asked for may substitute its default, and MyISAM accepts BEGIN and ROLLBACK
// while ignoring them: only the catalogue tells. A missing table is
// sql.ErrNoRows (wrapped).
func MySQLEngineOf(ctx context.Context, q Querier, table string) (engine string, transactional bool, err error) {
	var tx sql.NullString
	err = q.QueryRow(ctx,
		`SELECT t.ENGINE, e.TRANSACTIONS FROM information_schema.TABLES t
		 LEFT JOIN information_schema.ENGINES e ON e.ENGINE = t.ENGINE
		 WHERE t.TABLE_SCHEMA = DATABASE() AND t.TABLE_NAME = ?`, table).Scan(&engine, &tx)
	if err != nil {
		return "", false, fmt.Errorf("mysql: reading the engine of %s from information_schema: %w", table, err)
	}
	return engine, tx.String == "YES", nil
}

// ConnectError is a failure to open a connection, explained in one line that
// names the server (never the password) and what to change. Err is the
// driver's error, for errors.As and errors.Is.
type ConnectError struct {
	Msg string
	Err error
}

func (e *ConnectError) Error() string { return e.Msg }
func (e *ConnectError) Unwrap() error { return e.Err }

// ExplainMySQL explains err, raised while connecting to the server of cfg.
// limit, when not nil, reads the server's connection limit over a connection
// that is already open (used for "too many connections"); need is how many
// connections the run needs at once (0 when unknown).
func ExplainMySQL(cfg *mysql.Config, err error, limit func(variable string) string, need int) error {
	var ce *ConnectError
	if errors.As(err, &ce) {
		return err
	}
	addr := MySQLAddr(cfg)
	msg := ""
	switch n := MySQLNumber(err); n {
	case ErrConCount:
		msg = fmt.Sprintf("mysql: %s refused a connection: too many connections (%s, shared with every other client) — run fewer --attempts, or raise it: SET GLOBAL max_connections = <n>%s",
			addr, limitText("@@max_connections", limit), needText(need))
	case ErrTooManyUserConns, ErrUserLimitReached:
		msg = fmt.Sprintf("mysql: %s refused a connection: user %q has too many connections (its account's MAX_USER_CONNECTIONS, or %s) — run fewer --attempts, or raise the limit",
			addr, cfg.User, limitText("@@max_user_connections", limit))
	case ErrAccessDenied:
		msg = fmt.Sprintf("mysql: wrong user or password for user %q at %s — %s", cfg.User, addr, MySQLHint)
	case ErrDBAccessDenied:
		msg = fmt.Sprintf("mysql: user %q may not use database %q at %s — grant access or name another database; %s", cfg.User, cfg.DBName, addr, MySQLHint)
	case ErrBadDB:
		msg = fmt.Sprintf("mysql: database %q does not exist at %s — create it (CREATE DATABASE `%s`) or name another; %s", cfg.DBName, addr, cfg.DBName, MySQLHint)
	case 0:
		msg = fmt.Sprintf("mysql: cannot connect to %s (%s) — is the server running? %s", addr, netCause(err), MySQLHint)
	default:
		msg = fmt.Sprintf("mysql: connecting to %s failed: %v — %s", addr, err, MySQLHint)
	}
	return &ConnectError{Msg: msg, Err: err}
}

func needText(need int) string {
	if need <= 0 {
		return " (racetest holds one connection per attempt plus two of its own)"
	}
	return fmt.Sprintf(" (this run holds %d at once: one per attempt plus two of its own)", need)
}

func limitText(variable string, limit func(string) string) string {
	if limit == nil {
		return variable + " unknown"
	}
	return variable + " = " + limit(variable)
}

// netCause says in a few words why a connection could not be made.
func netCause(err error) string {
	var dnsErr *net.DNSError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.As(err, &dnsErr):
		return "host not found: " + dnsErr.Name
	case errors.Is(err, context.DeadlineExceeded), isTimeout(err):
		return "no answer within the connect timeout"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "host unreachable"
	case errors.Is(err, mysql.ErrInvalidConn), errors.Is(err, driver.ErrBadConn):
		return "the connection was closed during the handshake"
	}
	return err.Error()
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
