package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/racetest/racetest/internal/sqldb"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
)

// The engine contract, and the optional parts this target promises:
// checked here so a changed signature fails the build, not the report.
var (
	_ runner.Target    = (*target)(nil)
	_ runner.Describer = (*target)(nil)
	_ runner.Noter     = (*target)(nil)
)

// Name is the backend's name: MySQL and MariaDB alike.
const Name = "mysql"

// ReadKey is the key of the backend's replica in scenarios.Connections and
// in a suite's connections:.
const ReadKey = Name + scenarios.ReadSuffix

// Backend is the MySQL/MariaDB backend as the registry knows it: its
// connection and the knobs it accepts.
var Backend = scenarios.Backend{
	Name:    Name,
	Summary: "MySQL or MariaDB (InnoDB by default; --engine myisam or aria, --isolation)",
	Server:  true,
	Conn: &scenarios.Connection{
		Flag: "mysql-dsn", Env: "RACETEST_MYSQL_DSN", Default: DefaultDSN,
		What: "MySQL/MariaDB DSN or mysql:// URL", Redact: sqldb.RedactMySQL,
		Key:   Name,
		Probe: probe,
	},
	ReadConn: &scenarios.Connection{
		Flag: "mysql-read-dsn", Env: "RACETEST_MYSQL_READ_DSN",
		What: "a replica of --mysql-dsn, for replica-read (scripts/cluster.sh start mariadb-replica prints one)", Redact: sqldb.RedactMySQL,
		Key:     ReadKey,
		Cluster: "mariadb-replica", Probe: probe,
	},
	Isolations: sqldb.IsolationNames(),
	Engines:    Engines,
	Releases:   []string{"last-byte"},
	Kept:       "tables",
	Janitor:    Janitor,
}

// probe connects to the server conn names, without a handshake.
func probe(ctx context.Context, conn string) error {
	cfg, err := sqldb.MySQLConfig(conn)
	if err != nil {
		return err
	}
	return scenarios.ProbeAddr(ctx, cfg.Net, cfg.Addr)
}

// Register adds the MySQL/MariaDB backend and its five scenarios to r.
func Register(r *scenarios.Registry) {
	r.AddBackend(Backend)
	for _, s := range []struct {
		name string
		k    kind
	}{
		{scenarios.MemorySet, memorySet},
		{scenarios.CheckThenWrite, checkThenWrite},
		{scenarios.ConditionalUpdate, conditionalUpdate},
		{scenarios.UniqueInsert, uniqueInsert},
		{scenarios.TTLLease, ttlLease},
	} {
		r.Register(s.name, Name, factory(s.name, s.k))
		r.SetVariants(s.name, Name, s.k.variants)
	}
}

// kind is one scenario's statements on this backend; target does the rest.
type kind struct {
	// variants lists the accepted --variant values besides "".
	variants []string
	// tables are the scenario's tables, the main one first (ttl-lease's
	// grants second). Their names derive from the run id alone, so that a
	// replica process finds the tables its parent created.
	tables func(t *target) []tableDef
	// reset makes the burst's subject; nil means a fresh token and no row.
	reset   func(ctx context.Context, t *target, burst int) (runner.Subject, error)
	attempt func(ctx context.Context, t *target, s *session, subj runner.Subject, w *runner.Worker) runner.Outcome
	effects func(ctx context.Context, t *target, subj runner.Subject) (int, error)
	notes   func(t *target) []string
}

func factory(name string, k kind) scenarios.Factory {
	return func(ctx context.Context, p scenarios.Params) (runner.Target, error) {
		if err := p.Validate(); err != nil {
			return nil, err
		}
		if p.TTL == 0 {
			p.TTL = scenarios.DefaultTTL
		}
		if p.Variant != "" && !contains(k.variants, p.Variant) {
			known := "none"
			if len(k.variants) > 0 {
				known = strings.Join(k.variants, ", ")
			}
			return nil, scenarios.BadParam(fmt.Errorf("mysql: %s has no variant %q (known: %s)", name, p.Variant, known))
		}
		st, err := Open(ctx, p)
		if err != nil {
			return nil, err
		}
		return &target{name: name, k: k, p: p, st: st}, nil
	}
}

// tableDef is one table a scenario needs: the part of its name after the
// run's prefix, and its columns and keys.
type tableDef struct{ part, definition string }

// target is one scenario on one MySQL or MariaDB database.
type target struct {
	name   string
	k      kind
	p      scenarios.Params
	st     *Store
	table  string // the scenario's main table
	grants string // ttl-lease's record of every grant
}

// use records the names of the scenario's tables, in kind.tables' order.
func (t *target) use(names []string) {
	t.table = names[0]
	if len(names) > 1 {
		t.grants = names[1]
	}
}

func (t *target) Prepare(ctx context.Context) error {
	// racetest's own DDL is never cut short: MySQL may still run a CREATE
	// the client gave up on, after the cleanup looked. Each statement has
	// its deadline; the run stops after.
	ctx = context.WithoutCancel(ctx)
	err := func() error {
		var names []string
		for _, d := range t.k.tables(t) {
			name, err := t.st.CreateTable(ctx, d.part, d.definition)
			if err != nil {
				return err
			}
			names = append(names, name)
		}
		t.use(names)
		return nil
	}()
	if err != nil {
		// The runner cleans up only after a successful Prepare: drop what
		// was made before the failure here.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
		defer cancel()
		if derr := t.st.DropTables(cctx); derr != nil {
			return fmt.Errorf("%w; and %w", err, derr)
		}
		t.st.Close()
		return err
	}
	return nil
}

// Attach is Prepare for a replica process of 'run --processes' (serve
// --attached): it finds the tables its parent's Prepare created for the
// same run id, and neither creates them nor, at Cleanup, drops them. A
// table missing is an error: the replica never makes its own.
func (t *target) Attach(ctx context.Context) error {
	var names []string
	for _, d := range t.k.tables(t) {
		name, err := t.st.AttachTable(ctx, d.part)
		if err != nil {
			return err
		}
		names = append(names, name)
	}
	t.use(names)
	return nil
}

func (t *target) Cleanup(ctx context.Context) error {
	if err := t.st.DropTables(ctx); err != nil {
		return err
	}
	return t.st.Close()
}

func (t *target) Reset(ctx context.Context, burst int) (runner.Subject, error) {
	if t.k.reset == nil {
		return runner.Subject{Burst: burst, Key: t.token(burst)}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	return t.k.reset(ctx, t, burst)
}

func (t *target) token(burst int) string { return t.p.Prefix() + strconv.Itoa(burst) }

func (t *target) Effects(ctx context.Context, s runner.Subject) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	n, err := t.k.effects(ctx, t, s)
	if err != nil {
		return 0, fmt.Errorf("mysql: counting effects at %s: %w", t.st.Addr(), err)
	}
	return n, nil
}

func (t *target) Server() string { return t.st.Server().String() }

func (t *target) Notes() []string {
	notes := t.st.Notes()
	if t.k.notes != nil {
		notes = append(notes, t.k.notes(t)...)
	}
	return notes
}

func (t *target) Open(_ context.Context, replica, workers int) (runner.App, error) {
	if t.table == "" {
		return nil, fmt.Errorf("mysql: %s opened before its tables were prepared or attached (call Prepare, or Attach in a replica process)", t.name)
	}
	db, err := t.st.OpenPool(max(workers, 1))
	if err != nil {
		return nil, err
	}
	return &app{t: t, replica: replica, db: db}, nil
}

// count runs a COUNT(*) (or any one-integer query) over the admin pool.
func (t *target) count(ctx context.Context, query string, args ...any) (int, error) {
	var n int
	err := t.st.DB().QueryRowContext(ctx, query, args...).Scan(&n)
	return n, err
}

// app is one replica: its own pool, and its own memory for memory-set.
type app struct {
	t       *target
	replica int
	db      *sql.DB

	// memory is memory-set's processing set: this replica's own.
	memory scenarios.ReplicaMemory
}

func (a *app) Session(ctx context.Context, worker int) (runner.Session, error) {
	conn, err := a.t.st.Session(ctx, a.db)
	if err != nil {
		return nil, err
	}
	s := &session{a: a, worker: worker, conn: conn}
	if err := s.readID(ctx); err != nil {
		conn.Close()
		return nil, err
	}
	return s, nil
}

// readID reads the server's id of the session's connection.
func (s *session) readID(ctx context.Context) error {
	id, err := sqldb.SessionID(ctx, sqldb.MySQL, sqldb.Std(s.conn))
	s.id.Store(id)
	return err
}

// LockWait asks the server, over the run's own pool, whether the
// session's statement waits on a lock (InnoDB's lock waits, the process
// list): an explorer's blocked step.
func (s *session) LockWait(ctx context.Context) (bool, error) {
	return sqldb.LockWait(ctx, sqldb.MySQL, sqldb.Std(s.a.t.st.DB()), s.id.Load())
}

func (a *app) Close() error { return a.db.Close() }

// session is one worker's dedicated connection.
type session struct {
	a      *app
	worker int
	conn   *sql.Conn
	id     atomic.Int64 // conn's id on the server, for lock-wait questions
}

func (s *session) Attempt(ctx context.Context, subj runner.Subject, w *runner.Worker) runner.Outcome {
	if s.conn == nil {
		// The previous attempt broke the connection (a timeout closes it):
		// take a new one, as an application's pool would.
		conn, err := s.a.t.st.Session(ctx, s.a.db)
		if err != nil && (scenarios.Expired(ctx) || errors.Is(err, context.DeadlineExceeded)) {
			// The attempt's own deadline ran out while connecting: the
			// server is up, the --timeout is shorter than a connection.
			return runner.Failed(scenarios.ErrReconnectTimeout)
		}
		if err != nil {
			return runner.Failed(err)
		}
		s.conn = conn
		if err := s.readID(ctx); err != nil {
			return runner.Failed(err)
		}
	}
	o := s.a.t.k.attempt(ctx, s.a.t, s, subj, w)
	if o.Err != nil && isBadConn(o.Err) {
		s.conn.Close()
		s.conn = nil
	}
	return o
}

func (s *session) Close() error {
	if s.conn == nil {
		return nil
	}
	err := s.conn.Close()
	s.conn = nil
	return err
}

// pause waits out the run's --gap between check and act.
func pause(ctx context.Context, d time.Duration) error { return scenarios.Sleep(ctx, d) }

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
