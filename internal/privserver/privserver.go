//go:build linux

package privserver

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver, for the readiness check
)

// Kind names a server product.
type Kind string

// The servers this package can start.
const (
	Redis    Kind = "redis"
	MariaDB  Kind = "mysql"
	Postgres Kind = "postgres"
)

// Binaries each kind needs; a test skips (or, under RACETEST_REQUIRE_SERVERS,
// fails) when one is missing.
var binaries = map[Kind][]string{
	Redis:    {"redis-server"},
	MariaDB:  {"mariadb-install-db", "mariadbd"},
	Postgres: {pgBin("initdb"), pgBin("postgres")},
}

// pgBin is the path of a PostgreSQL 15 program (Debian keeps them off PATH).
func pgBin(name string) string {
	if dir := os.Getenv("RACETEST_PG_BIN"); dir != "" {
		return filepath.Join(dir, name)
	}
	return filepath.Join("/usr/lib/postgresql/15/bin", name)
}

// startTimeout bounds how long a server may take to answer after its start
// (mariadb-install-db and initdb take seconds on a loaded machine).
const startTimeout = 90 * time.Second

// Server is one private server.
type Server struct {
	Kind Kind
	Port int
	// URL is the connection string racetest takes for this server
	// (--redis-url, --mysql-dsn, --postgres-url).
	URL string
	dir string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// Missing returns the first program kind needs that is not installed, or "".
func Missing(kind Kind) string {
	for _, b := range binaries[kind] {
		if _, err := exec.LookPath(b); err != nil {
			return b
		}
	}
	return ""
}

// Start starts a private server of kind for t, and registers its Close with
// t.Cleanup. It fails t when the server does not come up.
func Start(t testing.TB, kind Kind) *Server {
	t.Helper()
	s, err := New(kind)
	if s != nil {
		t.Cleanup(func() {
			if err := s.Close(); err != nil {
				t.Errorf("privserver: %v", err)
			}
		})
	}
	if err != nil {
		t.Fatalf("privserver: %v", err)
	}
	return s
}

// New initialises and starts a private server of kind. On error the
// returned Server (when not nil) still needs Close.
func New(kind Kind) (*Server, error) {
	if b := Missing(kind); b != "" {
		return nil, fmt.Errorf("%s: %s is not installed", kind, b)
	}
	dir, err := os.MkdirTemp("", "racetest-privserver-"+string(kind)+"-")
	if err != nil {
		return nil, err
	}
	s := &Server{Kind: kind, dir: dir}
	port, err := freePort()
	if err != nil {
		return s, err
	}
	s.Port = port
	switch kind {
	case Redis:
		s.URL = fmt.Sprintf("redis://127.0.0.1:%d/0", port)
	case MariaDB:
		s.URL = fmt.Sprintf("root@tcp(127.0.0.1:%d)/test", port)
	case Postgres:
		s.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	default:
		return s, fmt.Errorf("unknown kind %q", kind)
	}
	if err := s.initialise(); err != nil {
		return s, err
	}
	return s, s.Restart()
}

// Dir is the server's temporary directory (data, socket, log).
func (s *Server) Dir() string { return s.dir }

// freePort returns a local TCP port nothing listens on (just freed).
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("no free local port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// runAs is the user a server runs as: PostgreSQL refuses to run as root,
// so under root it runs as the system's postgres user (owning its
// directory); MariaDB is told to run as root.
func (s *Server) runAs() (*syscall.Credential, error) {
	if s.Kind != Postgres || os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("postgres refuses to run as root, and there is no postgres user to run it as: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := filepath.Walk(s.dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	}); err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func (s *Server) data() string { return filepath.Join(s.dir, "data") }

// tmp is a MariaDB server's tmpdir, of its own: at start mariadbd deletes
// every file named #sql… in its tmpdir, and with the default, /tmp, one
// private server starting deleted another's temporary tables while
// mariadb-install-db was building its system tables ("Could not remove
// temporary table … error: 2", then "Unknown table 'mysql.tmp_user_sys'":
// the fault tests run the private servers of two packages at once), and
// would delete the machine's own server's.
func (s *Server) tmp() string { return filepath.Join(s.dir, "tmp") }

// initialise makes the server's data directory.
func (s *Server) initialise() error {
	var cmd *exec.Cmd
	switch s.Kind {
	case Redis:
		return os.Mkdir(s.data(), 0o700)
	case MariaDB:
		if err := os.Mkdir(s.tmp(), 0o700); err != nil {
			return err
		}
		cmd = exec.Command("mariadb-install-db", "--no-defaults", "--datadir="+s.data(), "--tmpdir="+s.tmp(),
			"--auth-root-authentication-method=normal", "--skip-name-resolve", "--user="+currentUser(),
			"--innodb-log-file-size=8M", "--innodb-buffer-pool-size=16M")
	case Postgres:
		if err := os.Mkdir(s.data(), 0o700); err != nil {
			return err
		}
		cmd = exec.Command(pgBin("initdb"), "-D", s.data(), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync", "--locale=C")
	}
	cred, err := s.runAs()
	if err != nil {
		return err
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: cred}
	cmd.Dir = s.dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %s failed: %w\n%s", s.Kind, cmd.Args[0], err, tail(out))
	}
	return nil
}

func currentUser() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return "root"
}

// serverCommand is the command line that runs the server in the
// foreground, on its own port and socket, bound to 127.0.0.1 only.
func (s *Server) serverCommand() *exec.Cmd {
	port := strconv.Itoa(s.Port)
	switch s.Kind {
	case Redis:
		// Persisted on every write, so that a killed server comes back with
		// what the run wrote, as a real one configured for durability would.
		return exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1", "--dir", s.data(),
			"--save", "", "--appendonly", "yes", "--appendfsync", "always", "--daemonize", "no",
			"--unixsocket", "", "--logfile", "")
	case MariaDB:
		return exec.Command("mariadbd", "--no-defaults", "--datadir="+s.data(), "--tmpdir="+s.tmp(), "--port="+port,
			"--bind-address=127.0.0.1", "--socket="+filepath.Join(s.dir, "mysqld.sock"),
			"--pid-file="+filepath.Join(s.dir, "mysqld.pid"), "--user="+currentUser(), "--skip-name-resolve",
			"--skip-log-bin", "--innodb-buffer-pool-size=16M", "--innodb-log-file-size=8M",
			"--innodb-flush-log-at-trx-commit=2", "--performance-schema=OFF", "--max-connections=200",
			"--log-error="+filepath.Join(s.dir, "error.log"))
	default:
		return exec.Command(pgBin("postgres"), "-D", s.data(), "-p", port, "-k", s.dir,
			"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "shared_buffers=16MB",
			"-c", "max_connections=100", "-c", "logging_collector=off")
	}
}

// Restart starts the server again (on the same port and data) after Kill,
// or for the first time. It waits until the server answers.
func (s *Server) Restart() error {
	s.mu.Lock()
	if s.cmd != nil {
		s.mu.Unlock()
		return fmt.Errorf("%s: already running", s.Kind)
	}
	cmd := s.serverCommand()
	cred, err := s.runAs()
	if err != nil {
		s.mu.Unlock()
		return err
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: cred}
	cmd.Dir = s.dir
	logf, err := os.OpenFile(filepath.Join(s.dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		s.mu.Unlock()
		return err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		s.mu.Unlock()
		return fmt.Errorf("%s: cannot start %s: %w", s.Kind, cmd.Args[0], err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(exited) }()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := s.waitReady(ctx, exited); err != nil {
		return fmt.Errorf("%s on port %d did not come up: %w\n%s", s.Kind, s.Port, err, s.Log())
	}
	return nil
}

// waitReady polls until the server answers a ping, or it exits.
func (s *Server) waitReady(ctx context.Context, exited <-chan struct{}) error {
	var last error
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		last = s.ping(pctx)
		cancel()
		if last == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("it exited (%v)", last)
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// ping checks that the server answers a query.
func (s *Server) ping(ctx context.Context) error {
	switch s.Kind {
	case Redis:
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", s.addr())
		if err != nil {
			return err
		}
		defer c.Close()
		if dl, ok := ctx.Deadline(); ok {
			c.SetDeadline(dl)
		}
		if _, err := c.Write([]byte("PING\r\n")); err != nil {
			return err
		}
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			return err
		}
		if !strings.HasPrefix(line, "+PONG") {
			return fmt.Errorf("answered %q", strings.TrimSpace(line))
		}
		return nil
	case MariaDB:
		cfg, err := mysql.ParseDSN(s.URL)
		if err != nil {
			return err
		}
		conn, err := mysql.NewConnector(cfg)
		if err != nil {
			return err
		}
		db := sql.OpenDB(conn)
		defer db.Close()
		return db.PingContext(ctx)
	default:
		db, err := sql.Open("pgx", s.URL)
		if err != nil {
			return err
		}
		defer db.Close()
		return db.PingContext(ctx)
	}
}

func (s *Server) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)) }

// signal sends sig to every process of the server: its process group, and
// every descendant, since PostgreSQL's backends each call setsid and leave
// the group. It returns the pids it signalled.
func (s *Server) signal(sig syscall.Signal) ([]int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return nil, fmt.Errorf("%s: not running", s.Kind)
	}
	root := s.cmd.Process.Pid
	// Freeze the server first, so that it forks nothing while its
	// processes are listed, and list them while they are still its
	// children (a killed parent's children go to init, out of reach).
	if sig != syscall.SIGCONT {
		if err := syscall.Kill(-root, syscall.SIGSTOP); err != nil && !errors.Is(err, syscall.ESRCH) {
			return nil, err
		}
	}
	done := map[int]bool{root: true}
	for range 5 {
		fresh := 0
		for _, pid := range descendants(root) {
			if !done[pid] {
				done[pid] = true
				fresh++
				if sig != syscall.SIGCONT {
					_ = syscall.Kill(pid, syscall.SIGSTOP)
				}
			}
		}
		if fresh == 0 {
			break
		}
	}
	for pid := range done {
		if pid != root {
			_ = syscall.Kill(pid, sig)
		}
	}
	if err := syscall.Kill(-root, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return nil, err
	}
	pids := make([]int, 0, len(done))
	for pid := range done {
		pids = append(pids, pid)
	}
	return pids, nil
}

// descendants lists the live processes below root, from /proc.
func descendants(root int) []int {
	entries, _ := os.ReadDir("/proc")
	parent := map[int]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, state, ok := procStat(pid); ok && state != 'Z' {
			parent[pid] = ppid
		}
	}
	var out []int
	var walk func(int)
	walk = func(p int) {
		for c, pp := range parent {
			if pp == p {
				out = append(out, c)
				walk(c)
			}
		}
	}
	walk(root)
	return out
}

// procStat reads a process's parent and state from /proc/PID/stat.
func procStat(pid int) (ppid int, state byte, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	// "pid (comm) S ppid ...": comm may hold spaces and parentheses.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0, 0, false
	}
	ppid, err = strconv.Atoi(f[1])
	return ppid, f[0][0], err == nil
}

// alive reports whether pid is a process that has not exited (a zombie
// waiting for a parent that does not reap counts as exited).
func alive(pid int) bool {
	_, state, ok := procStat(pid)
	return ok && state != 'Z'
}

// Pause stops every process of the server (SIGSTOP): it keeps its
// connections open and answers nothing, as a server stuck on a full disk or
// a frozen VM would.
func (s *Server) Pause() error {
	if _, err := s.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	return nil
}

// Resume lets a paused server go on (SIGCONT).
func (s *Server) Resume() error {
	if _, err := s.signal(syscall.SIGCONT); err != nil {
		return err
	}
	return nil
}

// Kill kills every process of the server with SIGKILL, as a crash or the
// kernel's OOM killer would, and waits until the server has exited. Restart
// brings it back on the same port and data.
func (s *Server) Kill() error {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.mu.Unlock()
	if cmd == nil {
		return nil
	}
	pids, err := s.signal(syscall.SIGKILL)
	if err != nil {
		return fmt.Errorf("%s: kill: %w", s.Kind, err)
	}
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		return fmt.Errorf("%s: pid %d did not exit 30 s after SIGKILL", s.Kind, cmd.Process.Pid)
	}
	// Every process must be gone (PostgreSQL refuses to start while a
	// backend of the old one still holds its shared memory).
	deadline := time.Now().Add(30 * time.Second)
	for _, pid := range pids {
		for alive(pid) {
			if time.Now().After(deadline) {
				return fmt.Errorf("%s: pid %d did not exit 30 s after SIGKILL", s.Kind, pid)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	s.mu.Lock()
	s.cmd, s.exited = nil, nil
	s.mu.Unlock()
	return nil
}

// Log returns the end of the server's log, for a failure message.
func (s *Server) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "server.log"))
	if s.Kind == MariaDB {
		e, _ := os.ReadFile(filepath.Join(s.dir, "error.log"))
		b = append(b, e...)
	}
	return tail(b)
}

// Close kills the server (a paused one too) and removes its directory.
func (s *Server) Close() error {
	err := s.Kill()
	if rerr := os.RemoveAll(s.dir); rerr != nil {
		err = errors.Join(err, rerr)
	}
	return err
}

func tail(b []byte) string {
	const max = 2000
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return string(b)
}

// Ping checks that the server answers, within ctx.
func (s *Server) Ping(ctx context.Context) error { return s.ping(ctx) }

// GateEnv turns on the tests that start private servers and hurt them.
const GateEnv = "RACETEST_FAULTS"

// Gate skips t unless RACETEST_FAULTS=1: those tests start servers of
// their own and take tens of seconds, so CI runs them in a step of theirs.
func Gate(t testing.TB) {
	t.Helper()
	if os.Getenv(GateEnv) != "1" {
		t.Skipf("starts private servers and kills them: set %s=1 to run it", GateEnv)
	}
}

// Need skips t when kind's programs are not installed, and fails it when
// RACETEST_REQUIRE_SERVERS is set.
func Need(t testing.TB, kind Kind) {
	t.Helper()
	if b := Missing(kind); b != "" {
		if os.Getenv("RACETEST_REQUIRE_SERVERS") != "" {
			t.Fatalf("%s: %s is not installed and RACETEST_REQUIRE_SERVERS is set", kind, b)
		}
		t.Skipf("%s: %s is not installed, skipping (set RACETEST_REQUIRE_SERVERS=1 to make this a failure)", kind, b)
	}
}
