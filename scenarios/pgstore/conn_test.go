package pgstore

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/racetest/racetest/internal/privserver"
	"github.com/racetest/racetest/internal/sqldb"
	"github.com/racetest/racetest/internal/testenv"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/runs"
)

// buildErr builds a target of unique-insert against conn and returns the error.
func buildErr(t *testing.T, conn string) (time.Duration, error) {
	t.Helper()
	p := scenarios.Params{RunID: scenarios.NewRunID(), Conn: scenarios.NewConnections(map[string]string{"postgres": conn})}
	start := time.Now()
	_, err := factory(scenarioNamed(t, scenarios.UniqueInsert))(context.Background(), p)
	return time.Since(start), err
}

func assertOneRedactedLine(t *testing.T, err error, wants ...string) {
	t.Helper()
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	if strings.Contains(msg, "s3cret") {
		t.Errorf("the password leaks: %s", msg)
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("more than one line: %s", msg)
	}
	for _, w := range wants {
		if !strings.Contains(msg, w) {
			t.Errorf("message lacks %q: %s", w, msg)
		}
	}
}

func TestUnreachableFailsFastAndRedacted(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // a port nobody listens on: connection refused
	took, err := buildErr(t, "postgres://alice:s3cret@"+addr+"/test?sslmode=disable")
	assertOneRedactedLine(t, err, "cannot connect to "+addr, "connection refused", "RACETEST_POSTGRES_URL", "--postgres-url")
	if took > 3*time.Second {
		t.Errorf("took %s to fail", took)
	}

	// A server that accepts and never answers: the connect timeout ends it.
	hung, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hung.Close()
	go func() {
		for {
			c, err := hung.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	took, err = buildErr(t, "postgres://alice:s3cret@"+hung.Addr().String()+"/test?sslmode=disable&connect_timeout=1")
	assertOneRedactedLine(t, err, "cannot connect to "+hung.Addr().String(), "no answer within 1s")
	if took > 4*time.Second {
		t.Errorf("took %s to fail against a silent server (connect_timeout=1)", took)
	}

	_, err = buildErr(t, "postgres://alice:s3cret@[::1/x")
	assertOneRedactedLine(t, err, "cannot parse", "xxxxx")
}

// fakeServer answers every startup message with a FATAL error, as a server
// with password authentication refuses a wrong password.
func fakeServer(t *testing.T, code, message string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				be := pgproto3.NewBackend(c, c)
				if _, err := be.ReceiveStartupMessage(); err != nil {
					return
				}
				be.Send(&pgproto3.ErrorResponse{Severity: "FATAL", Code: code, Message: message})
				_ = be.Flush()
			}()
		}
	}()
	return l.Addr().String()
}

func TestAuthFailureNamesUserNotPassword(t *testing.T) {
	addr := fakeServer(t, sqldb.CodeInvalidPassword, `password authentication failed for user "alice"`)
	_, err := buildErr(t, "postgres://alice:s3cret@"+addr+"/test?sslmode=disable")
	assertOneRedactedLine(t, err, `refused user "alice"`, "28P01", "password", "RACETEST_POSTGRES_URL")
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != sqldb.CodeInvalidPassword {
		t.Errorf("the driver's error is not kept for errors.As: %v", err)
	}
}

func TestUnknownDatabase(t *testing.T) {
	p := serverParams(t)
	cfg, _ := pgx.ParseConfig(testenv.URL("postgres"))
	u := "postgres://" + cfg.User + ":s3cret@" + net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))) + "/racetest_nosuchdb_" + p.RunID + "?sslmode=disable"
	_, err := buildErr(t, u)
	assertOneRedactedLine(t, err, "database \"racetest_nosuchdb_"+p.RunID+"\" does not exist", "createdb")
}

// When the attempts need more connections than the server accepts, the run
// fails with one line naming max_connections and what to change. The test
// fills every slot but a few of a private server of its own
// (RACETEST_FAULTS=1, a step of .ci/run): filling the shared server refused
// whatever other package's test connected in that moment, and their
// connections changed the slots it had counted.
func TestTooManyConnections(t *testing.T) {
	privserver.Gate(t)
	privserver.Need(t, privserver.Postgres)
	url := privserver.Start(t, privserver.Postgres).URL
	p := scenarios.Params{RunID: scenarios.NewRunID(), Conn: scenarios.NewConnections(map[string]string{"postgres": url}), TTL: scenarios.DefaultTTL}
	c := connTo(t, url)
	ctx := context.Background()
	tg := build(t, scenarios.UniqueInsert, p)
	var maxConn, inUse int
	if err := c.QueryRow(ctx, `SELECT current_setting('max_connections')::int,
		(SELECT count(*)::int FROM pg_stat_activity WHERE backend_type = 'client backend')`).Scan(&maxConn, &inUse); err != nil {
		t.Fatal(err)
	}
	limit := maxConn
	if !tg.limits.superuser {
		limit -= tg.limits.superReserved + tg.limits.reserved
	}
	const free = 4 // racetest's own connection, then three workers
	var mu sync.Mutex
	var fillers []*pgx.Conn
	t.Cleanup(func() {
		for _, f := range fillers {
			_ = f.Close(context.Background())
		}
	})
	var wg sync.WaitGroup
	for range max(limit-inUse-free, 0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f, err := pgx.Connect(ctx, url)
			if err != nil {
				return // someone else took the slot: the server is full enough
			}
			mu.Lock()
			fillers = append(fillers, f)
			mu.Unlock()
		}()
	}
	wg.Wait()
	t.Logf("max_connections %d, %d in use before, %d fillers", maxConn, inUse, len(fillers))

	res, err := runner.Run(ctx, tg, runner.Attempts(16), runner.Bursts(1))
	if err == nil {
		t.Fatalf("16 attempts ran on a server with about %d free slots", free)
	}
	if res.CleanupErr != nil {
		t.Errorf("cleanup: %v", res.CleanupErr)
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != sqldb.CodeTooManyConnections {
		t.Fatalf("error is not 53300: %v", err)
	}
	want := "max_connections is " + strconv.Itoa(maxConn)
	assertOneRedactedLine(t, err, "SQLSTATE 53300", want, "run fewer attempts", "raise max_connections", "other clients hold")
	t.Logf("message: %s", err)
}

// The message for a user who is not a superuser subtracts the reserved slots.
func TestTooManyMessageNonSuperuser(t *testing.T) {
	tg := &target{addr: "db:5432", limits: limits{maxConnections: 100, superReserved: 3, user: "app", roleLimit: -1, dbLimit: -1}}
	tg.open.Store(96)
	pe := &pgconn.PgError{Code: sqldb.CodeTooManyConnections, Message: "remaining connection slots are reserved for non-replication superuser connections"}
	msg := tg.tooMany(pe, pe).Error()
	for _, w := range []string{"connection 97 of this run", "max_connections is 100 minus 3 reserved", "97 are open to user \"app\"", "run fewer attempts", "raise max_connections"} {
		if !strings.Contains(msg, w) {
			t.Errorf("message lacks %q: %s", w, msg)
		}
	}
	role := &pgconn.PgError{Code: sqldb.CodeTooManyConnections, Message: `too many connections for role "app"`}
	tg.limits.roleLimit = 10
	if msg := tg.tooMany(role, role).Error(); !strings.Contains(msg, "at most 10 connections") || !strings.Contains(msg, `ALTER ROLE "app" CONNECTION LIMIT`) {
		t.Errorf("role limit message: %s", msg)
	}
}

// countingDial dials through net.Dialer and remembers each connection's
// local port, so the test can ask the server which port a session uses.
type countingDial struct {
	mu    sync.Mutex
	ports map[int]bool
}

func (d *countingDial) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err == nil {
		d.mu.Lock()
		d.ports[c.LocalAddr().(*net.TCPAddr).Port] = true
		d.mu.Unlock()
	}
	return c, err
}

// Every connection of a run — the probe, racetest's own and each worker's —
// is dialled through Params.Dial: the server sees each worker session on a
// port the hook dialled.
func TestDialHookUsed(t *testing.T) {
	p := serverParams(t)
	d := &countingDial{ports: map[int]bool{}}
	p.Dial = d.dial
	tg := build(t, scenarios.CheckThenWrite, p)
	ctx := context.Background()
	if err := tg.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tg.Cleanup(context.Background()) })
	app, _ := tg.Open(ctx, 0, 4)
	for i := range 4 {
		sess, err := app.Session(ctx, i)
		if err != nil {
			t.Fatal(err)
		}
		s := sess.(*session)
		var port int
		if err := s.c.QueryRow(ctx, "SELECT inet_client_port()").Scan(&port); err != nil {
			t.Fatal(err)
		}
		d.mu.Lock()
		hooked := d.ports[port]
		d.mu.Unlock()
		if !hooked {
			t.Errorf("worker %d's connection (client port %d) was not dialled through Params.Dial", i, port)
		}
		// The attempt itself runs on that connection.
		if o := sess.Attempt(ctx, runner.Subject{Key: p.Prefix() + "0"}, &runner.Worker{ID: i}); o.Class == runner.Error {
			t.Errorf("attempt: %v", o.Err)
		}
		sess.Close()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.ports) != 1+1+4 {
		t.Errorf("%d connections dialled through the hook, want 6 (probe, racetest's own, 4 workers)", len(d.ports))
	}
}

// killSwitch dials normally until killed; then it closes every connection
// it made and refuses new ones, as a server that died would.
type killSwitch struct {
	mu    sync.Mutex
	conns []net.Conn
	dead  bool
}

func (k *killSwitch) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.dead {
		return nil, &net.OpError{Op: "dial", Net: network, Err: syscall.ECONNREFUSED}
	}
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err == nil {
		k.conns = append(k.conns, c)
	}
	return c, err
}

func (k *killSwitch) kill() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.dead = true
	for _, c := range k.conns {
		c.Close()
	}
}

// A server that goes away mid-run stops the run within seconds with a clear
// error; the bursts that finished are kept, and Cleanup names the tables it
// could not drop.
func TestServerDiesMidRun(t *testing.T) {
	p := serverParams(t)
	k := &killSwitch{}
	p.Dial = k.dial
	tg := build(t, scenarios.ConditionalUpdate, p)
	c := rawConn(t)
	t.Cleanup(func() {
		// The server "died" before the run's cleanup: drop by hand what
		// 'racetest clean' would.
		_, _ = c.Exec(context.Background(), "DROP TABLE IF EXISTS "+tg.n.coupons)
		_ = runs.UnregisterSQL(context.Background(), runs.Postgres, runs.Pgx(c), p.RunID)
	})
	start := time.Now()
	res, err := runner.Run(context.Background(), tg, runner.Attempts(4), runner.Bursts(100000), runner.Timeout(2*time.Second),
		runner.OnProgress(func(pr runner.Progress) {
			if pr.Done == 3 {
				k.kill()
			}
		}))
	took := time.Since(start)
	if err == nil {
		t.Fatal("the run went on after the server died")
	}
	t.Logf("after %s: %v; cleanup: %v", took.Round(time.Millisecond), err, res.CleanupErr)
	if took > 15*time.Second {
		t.Errorf("took %s to stop", took)
	}
	if len(res.Bursts) < 3 {
		t.Errorf("kept %d bursts, want the 3 that finished", len(res.Bursts))
	}
	if res.CleanupErr == nil || !strings.Contains(res.CleanupErr.Error(), tg.n.coupons) || !strings.Contains(res.CleanupErr.Error(), "connection refused") {
		t.Errorf("cleanup error should name the table left behind and why: %v", res.CleanupErr)
	}
}
