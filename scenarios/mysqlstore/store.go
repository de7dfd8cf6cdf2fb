package mysqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/racetest/racetest/internal/sqldb"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/runs"
)

// Timeouts for racetest's own statements (setup, reset, counting): a server
// that dies mid-run makes them fail, never hang.
const (
	connectTimeout = 10 * time.Second
	opTimeout      = sqldb.AdminTimeout
)

// Engines racetest may create tables with, the default first: --engine
// picks from this list and nothing else, so no user text ever reaches the
// SQL.
var Engines = []string{"innodb", "myisam", "aria"}

// engines maps each of Engines (and "", the default) to its SQL name.
var engines = map[string]string{"": "InnoDB", "innodb": "InnoDB", "myisam": "MyISAM", "aria": "Aria"}

// EngineName returns the canonical storage engine for --engine ("" is
// InnoDB), or an error naming the ones racetest knows.
func EngineName(engine string) (string, error) {
	if e, ok := engines[strings.ToLower(engine)]; ok {
		return e, nil
	}
	return "", scenarios.BadParam(fmt.Errorf("mysql: unknown --engine %q (known: %s)", engine, strings.Join(Engines, ", ")))
}

// IsolationLevel returns the SQL spelling of --isolation ("" is the server's
// default, returned as ""), or an error naming the known levels.
func IsolationLevel(isolation string) (string, error) {
	l, err := sqldb.ParseIsolation(isolation)
	if err != nil {
		return "", scenarios.BadParam(fmt.Errorf("mysql: unknown --isolation %q (known: read-uncommitted, read-committed, repeatable-read, serializable)", isolation))
	}
	return l.SQL(), nil
}

// Store is one run's handle on a MySQL or MariaDB database: a small admin
// pool for setup and counting, the tables the run created, and what the
// server is. Scenarios build on it; the replicas' pools come from OpenPool.
type Store struct {
	p      scenarios.Params
	cfg    *mysql.Config
	admin  *sql.DB
	server sqldb.ServerInfo
	engine string // canonical engine asked for
	level  string // isolation level to set per session ("" = default)

	mu           sync.Mutex
	tables       []string          // created by this run, in order
	registered   bool              // the run is in racetest_runs (see package runs)
	engineOf     map[string]string // engine the server really used, per table
	txEngine     map[string]bool   // whether that engine supports transactions
	defaultLevel string            // the server's default isolation level
	sessionLevel string            // the level read back from a worker session
	// snapshot is MariaDB's innodb_snapshot_isolation ("ON", "OFF"; ""
	// where the server has no such setting): ON makes REPEATABLE READ
	// refuse a write over a row changed since the snapshot, which changes
	// the outcome of read-then-write patterns.
	snapshot string
}

// Open connects to the server named by p.Conn.Get(Name) (DefaultDSN when
// empty), through p.Dial when set, and checks that it answers — within
// seconds, with a one-line error naming the server and what to change.
func Open(ctx context.Context, p scenarios.Params) (*Store, error) {
	engine, err := EngineName(p.Engine)
	if err != nil {
		return nil, err
	}
	level, err := IsolationLevel(p.Isolation)
	if err != nil {
		return nil, err
	}
	cfg, err := sqldb.MySQLConfig(p.Conn.Get(Name))
	if err != nil {
		return nil, err
	}
	if p.Dial != nil {
		// Every connection of the run, the admin pool's included, is
		// dialled here: a wire-level release mode wraps connections in it.
		cfg.DialFunc = p.Dial
	}
	s := &Store{p: p, cfg: cfg, engine: engine, level: level,
		engineOf: map[string]string{}, txEngine: map[string]bool{}}
	if s.admin, err = s.openDB(); err != nil {
		return nil, err
	}
	// Two are enough for racetest's own sequential statements; idle ones
	// are closed after a while since a kept run (--keep) never calls Cleanup.
	s.admin.SetMaxOpenConns(2)
	s.admin.SetMaxIdleConns(2)
	s.admin.SetConnMaxIdleTime(time.Minute)

	// The dial has its own timeout; this bounds the handshake of a server
	// that accepts connections and never answers.
	cctx, cancel := context.WithTimeout(ctx, cfg.Timeout+2*time.Second)
	defer cancel()
	if err := s.admin.PingContext(cctx); err != nil {
		s.admin.Close()
		return nil, sqldb.ExplainMySQL(cfg, err, nil, 0)
	}
	var version string
	if err := s.admin.QueryRowContext(cctx, "SELECT VERSION()").Scan(&version); err != nil {
		s.admin.Close()
		return nil, fmt.Errorf("mysql: reading the server version at %s: %w", sqldb.MySQLAddr(cfg), err)
	}
	s.server = sqldb.ParseMySQLVersion(version)
	if s.server.IsMariaDB() {
		var on sql.NullBool
		// Absent before MariaDB 10.6.18: then the setting does not exist.
		if s.admin.QueryRowContext(cctx, "SELECT @@innodb_snapshot_isolation").Scan(&on) == nil && on.Valid {
			s.snapshot = map[bool]string{true: "ON", false: "OFF"}[on.Bool]
		}
	}
	if s.defaultLevel, err = sqldb.MySQLIsolation(cctx, sqldb.Std(s.admin)); err != nil {
		s.admin.Close()
		return nil, err
	}
	return s, nil
}

func (s *Store) openDB() (*sql.DB, error) {
	c, err := mysql.NewConnector(s.cfg)
	if err != nil {
		return nil, fmt.Errorf("mysql: bad connection settings for %s: %w", sqldb.MySQLAddr(s.cfg), err)
	}
	db := sql.OpenDB(c)
	// A replica's connections live for the whole run: recycling one would
	// put a new handshake inside a burst.
	db.SetConnMaxLifetime(0)
	return db, nil
}

// Server is the product and version the server reports.
func (s *Store) Server() sqldb.ServerInfo { return s.server }

// Params are the run's parameters.
func (s *Store) Params() scenarios.Params { return s.p }

// Addr names the server (host:port), for messages.
func (s *Store) Addr() string { return sqldb.MySQLAddr(s.cfg) }

// DB is the admin pool, for setup and for counting effects. Attempts use
// their own sessions (OpenPool, Session).
func (s *Store) DB() *sql.DB { return s.admin }

// Engine is the storage engine the run asked for (canonical spelling).
func (s *Store) Engine() string { return s.engine }

// Close closes the admin pool. It does not drop tables (see DropTables).
func (s *Store) Close() error { return s.admin.Close() }

var tableName = regexp.MustCompile(`^[a-z0-9_]{1,64}$`)

// Table returns the run's name for table part (racetest_<runid>_<part>),
// with '-' spelled '_'. It panics on a name that could not be a plain
// identifier: parts are chosen by code, never by users.
func (s *Store) Table(part string) string {
	name := s.p.Prefix() + strings.ReplaceAll(part, "-", "_")
	if !tableName.MatchString(name) {
		panic("mysqlstore: bad table name " + name)
	}
	return name
}

// CreateTable creates the run's table part with the given column and key
// definitions and the run's storage engine, and records it for DropTables.
// It then reads back the engine the server really used.
func (s *Store) CreateTable(ctx context.Context, part, definition string) (string, error) {
	name := s.Table(part)
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	if err := s.register(ctx); err != nil {
		return "", err
	}
	// CREATE without IF NOT EXISTS: a table that is already there was not
	// made by this run, and is neither used nor dropped.
	stmt := fmt.Sprintf("CREATE TABLE `%s` (%s) ENGINE=%s", name, definition, s.engine)
	// Recorded for DropTables before it is sent: MySQL commits DDL at once,
	// so a CREATE cut short by Ctrl-C may have run on the server. Only the
	// server's own refusal proves the table is not the run's.
	s.mu.Lock()
	s.tables = append(s.tables, name)
	s.mu.Unlock()
	if _, err := s.admin.ExecContext(ctx, stmt); err != nil {
		if _, refused := errors.AsType[*mysql.MySQLError](err); refused {
			s.mu.Lock()
			s.tables = slices.DeleteFunc(s.tables, func(t string) bool { return t == name })
			s.mu.Unlock()
		}
		switch sqldb.MySQLNumber(err) {
		case sqldb.ErrTableExists:
			return "", fmt.Errorf("mysql: table %s already exists — racetest never uses or drops a table it did not create; run again for a new run id: %w", name, err)
		case sqldb.ErrUnknownStorageEng:
			return "", fmt.Errorf("mysql: %s has no %s storage engine — pick another --engine: %w", s.server, s.engine, err)
		}
		return "", fmt.Errorf("mysql: create table %s: %w", name, err)
	}
	engine, tx, err := s.EngineOf(ctx, name)
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	s.engineOf[name], s.txEngine[name] = engine, tx
	s.mu.Unlock()
	return name, nil
}

// AttachTable finds the run's existing table part, made by another
// process's CreateTable for the same run id: a replica process of
// 'run --processes' attaches to its parent's tables. The table is not
// recorded for DropTables (the process that created it drops it), and a
// missing table is an error, never created here.
func (s *Store) AttachTable(ctx context.Context, part string) (string, error) {
	name := s.Table(part)
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	engine, tx, err := s.EngineOf(ctx, name)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("mysql: table %s does not exist in database %s at %s — a replica attaches only to the tables its parent prepared for run id %s; did the parent stop, or point at another database?",
			name, s.cfg.DBName, s.Addr(), s.p.RunID)
	}
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	s.engineOf[name], s.txEngine[name] = engine, tx
	s.mu.Unlock()
	return name, nil
}

// EngineOf reads the storage engine the server used for table, and whether
// that engine supports transactions. A server without the engine asked for
// may substitute its default, and MyISAM accepts BEGIN and ROLLBACK while
// ignoring them: only the catalogue tells.
func (s *Store) EngineOf(ctx context.Context, table string) (engine string, transactional bool, err error) {
	return sqldb.MySQLEngineOf(ctx, sqldb.Std(s.admin), table)
}

// Tables lists the tables this run created, in order.
func (s *Store) Tables() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.tables...)
}

// register records the run in racetest_runs before its first table, and
// refuses a run id whose prefix already names a table (see package runs).
func (s *Store) register(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.registered {
		return nil
	}
	err := runs.RegisterSQL(ctx, runs.MySQL, runs.Std(s.admin), runs.New(s.p.RunID))
	var inUse *runs.InUseError
	// Without an answer the registration may have been written: DropTables
	// removes it.
	s.registered = !errors.As(err, &inUse)
	return err
}

// DropTables drops exactly the tables this run created, then the run's
// registration. It is idempotent, and when it fails the error names the
// tables to drop by hand. It runs under its own deadline whatever ctx says.
// A connection that a Ctrl-C broke in the middle of a statement can leave
// the admin pool answering "driver: bad connection" after database/sql's
// own retries: the drop then goes again on a pool of its own, as the
// families' cleanup does (sqlrun).
func (s *Store) DropTables(ctx context.Context) error {
	s.mu.Lock()
	tables := append([]string(nil), s.tables...)
	registered := s.registered
	s.mu.Unlock()
	if len(tables) == 0 && !registered {
		return nil
	}
	ctx, cancel := scenarios.CleanupContext(ctx)
	defer cancel()
	err := s.dropOn(ctx, s.admin)
	for try := 0; try < cleanupTries && err != nil && brokenConn(err) && ctx.Err() == nil; try++ {
		err = s.dropFresh(ctx)
	}
	if err == nil {
		return nil
	}
	s.mu.Lock()
	left := append([]string(nil), s.tables...)
	s.mu.Unlock()
	if len(left) == 0 {
		return err // the tables are gone; the registration is not
	}
	return fmt.Errorf("mysql: could not drop this run's tables %s at %s — drop them by hand or run 'racetest clean --run-id %s': %w",
		strings.Join(left, ", "), s.Addr(), s.p.RunID, err)
}

// cleanupTries is how many fresh pools DropTables tries after the admin
// pool's connection broke.
const cleanupTries = 3

// brokenConn reports whether err is a connection that broke or did not
// answer, which a fresh connection may not meet, as opposed to a server
// that refused the statement.
func brokenConn(err error) bool {
	return errors.Is(err, driver.ErrBadConn) || errors.Is(err, mysql.ErrInvalidConn) || scenarios.NoAnswer(err)
}

// dropFresh is dropOn over a pool of its own, dialled as every connection
// of the run is.
func (s *Store) dropFresh(ctx context.Context) error {
	db, err := s.openDB()
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	c, err := scenarios.RetryNoAnswer(ctx, db.Conn)
	if err != nil {
		return err
	}
	defer c.Close()
	return s.dropOn(ctx, c)
}

// dropOn drops the tables left to drop, then the registration, on q,
// forgetting each as it goes.
func (s *Store) dropOn(ctx context.Context, q runs.StdQuerier) error {
	s.mu.Lock()
	tables := append([]string(nil), s.tables...)
	registered := s.registered
	s.mu.Unlock()
	if len(tables) > 0 {
		quoted := make([]string, len(tables))
		for i, t := range tables {
			quoted[i] = "`" + t + "`"
		}
		if _, err := q.ExecContext(ctx, "DROP TABLE IF EXISTS "+strings.Join(quoted, ", ")); err != nil {
			return err
		}
		s.mu.Lock()
		s.tables = s.tables[len(tables):]
		s.mu.Unlock()
	}
	if registered {
		if err := runs.UnregisterSQL(ctx, runs.MySQL, runs.Std(q), s.p.RunID); err != nil {
			return err
		}
		s.mu.Lock()
		s.registered = false
		s.mu.Unlock()
	}
	return nil
}

// OpenPool opens a replica's own pool, sized to its workers so that every
// worker holds a connection of its own for the whole run.
func (s *Store) OpenPool(workers int) (*sql.DB, error) {
	db, err := s.openDB()
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(workers)
	// The default of 2 idle connections would close and reopen connections
	// between uses (180 new connections instead of 18 in db-semantics).
	db.SetMaxIdleConns(workers)
	db.SetConnMaxIdleTime(0)
	return db, nil
}

// Session takes one dedicated connection from db, pinged and with the run's
// isolation level set, for one worker. A refused connection comes back as
// one line naming the server's limit.
func (s *Store) Session(ctx context.Context, db *sql.DB) (*sql.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	conn, err := db.Conn(ctx)
	if err == nil {
		err = conn.PingContext(ctx)
		if err != nil {
			conn.Close()
		}
	}
	if err != nil {
		return nil, sqldb.ExplainMySQL(s.cfg, err, s.limit, s.need())
	}
	if s.level != "" {
		// The statement form works on MariaDB and MySQL 8 alike; the
		// variable names do not (tx_isolation vs transaction_isolation).
		if _, err := conn.ExecContext(ctx, "SET SESSION TRANSACTION ISOLATION LEVEL "+s.level); err != nil {
			conn.Close()
			return nil, fmt.Errorf("mysql: setting isolation level %s: %w", s.level, err)
		}
	}
	s.mu.Lock()
	known := s.sessionLevel != ""
	s.mu.Unlock()
	if !known {
		level, err := sqldb.MySQLIsolation(ctx, sqldb.Std(conn))
		if err != nil {
			conn.Close()
			return nil, err
		}
		s.mu.Lock()
		s.sessionLevel = level
		s.mu.Unlock()
	}
	return conn, nil
}

// need is how many connections the run holds at once, 0 when unknown.
func (s *Store) need() int {
	if s.p.Attempts <= 0 {
		return 0
	}
	return s.p.Attempts + 2
}

// limit reads a connection limit over the admin pool, which still holds a
// connection when the server refuses new ones.
func (s *Store) limit(variable string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var v string
	if err := s.admin.QueryRowContext(ctx, "SELECT "+variable).Scan(&v); err != nil {
		return "unknown: " + err.Error()
	}
	return v
}

// Notes says what the server really did with the run's settings: the
// isolation level in force and the engine behind each table.
func (s *Store) Notes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var notes []string
	switch {
	case s.sessionLevel != "" && s.level == "":
		notes = append(notes, fmt.Sprintf("mysql: isolation level %s (the server's default; --isolation changes it)", s.sessionLevel))
	case s.sessionLevel != "":
		notes = append(notes, fmt.Sprintf("mysql: isolation level %s, set on every worker's session", s.sessionLevel))
	case s.level == "":
		notes = append(notes, fmt.Sprintf("mysql: isolation level %s (the server's default; --isolation changes it)", s.defaultLevel))
	}
	switch {
	case s.snapshot != "":
		notes = append(notes, "mysql: MariaDB innodb_snapshot_isolation="+s.snapshot+
			" (ON: REPEATABLE READ refuses to write a row changed since its snapshot; OFF: it writes over it)")
	case s.server.IsMariaDB():
		notes = append(notes, "mysql: this MariaDB has no innodb_snapshot_isolation setting (before 10.6.18): REPEATABLE READ writes over rows changed since its snapshot")
	}
	seen := map[string]bool{}
	for _, t := range s.tables {
		e, ok := s.engineOf[t]
		if !ok || seen[e] {
			continue
		}
		seen[e] = true
		note := fmt.Sprintf("mysql: tables use the %s engine (read back from information_schema)", e)
		if !strings.EqualFold(e, s.engine) {
			note = fmt.Sprintf("mysql: asked for ENGINE=%s but the server created %s tables", s.engine, e)
		}
		if !s.txEngine[t] {
			note += fmt.Sprintf("; %s does not support transactions, and the server silently ignores them: BEGIN, COMMIT and ROLLBACK succeed, every write stays, and FOR UPDATE and the isolation level protect nothing", e)
		}
		notes = append(notes, note)
	}
	return notes
}
