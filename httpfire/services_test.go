package httpfire_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/racetest/racetest/httpfire"
	"github.com/racetest/racetest/internal/sqldb"
	"github.com/racetest/racetest/internal/testenv"
	"github.com/racetest/racetest/proxy"
	"github.com/racetest/racetest/report"
	"github.com/racetest/racetest/runner"
)

// The coupon services of testdata/services, written in Python
// (ThreadingHTTPServer, psycopg2, PyMySQL) and in Node (http, pg, mysql2),
// each run through a racetest proxy on PostgreSQL and on MariaDB. Each
// redeems a one-use coupon in six ways: through the proxy, the two naive
// ones (check-then-insert, read-modify-write) redeem it twice in every
// burst, and the four fixes (unique index, conditional UPDATE, SELECT …
// FOR UPDATE, SERIALIZABLE with retry) once, in every burst whose two
// requests met at the proxy's hold point, which every burst must.
func TestServicesThroughTheProxy(t *testing.T) {
	for _, lang := range []serviceLang{pythonService, nodeService} {
		t.Run(lang.name, func(t *testing.T) {
			for _, store := range []string{"postgres", "mysql"} {
				t.Run(store, func(t *testing.T) {
					start := lang.start(t, store)
					svc := newCouponService(t, store, start)
					for _, v := range []struct {
						path string
						race bool
						held string // how each held statement begins
					}{
						{"naive", true, "INSERT INTO"},
						{"naive-rmw", true, "UPDATE"},
						{"unique", false, "INSERT INTO"},
						{"conditional", false, "UPDATE"},
						{"for-update", false, "SELECT uses_left"},
						{"serializable", false, "INSERT INTO"},
					} {
						t.Run(v.path, func(t *testing.T) {
							began := time.Now()
							res := svc.run(t, v.path)
							var slowest runner.Burst
							account := "no account"
							for _, b := range res.Bursts {
								if b.Hold != nil && b.Duration >= slowest.Duration {
									slowest, account = b, b.Hold.Summary
								}
							}
							t.Logf("%s %s %s: %d bursts in %v; the slowest %v (%s)", lang.name, store, v.path, len(res.Bursts), time.Since(began).Round(time.Millisecond), slowest.Duration.Round(time.Millisecond), account)
							svc.check(t, res, v.race, v.held)
						})
					}
				})
			}
		})
	}
}

// serviceLang is one of the services: start launches it for store with
// env (DATABASE_URL, TABLE_PREFIX, LISTEN) and returns its process, or
// skips when what it needs is not installed.
type serviceLang struct {
	name  string
	start func(t *testing.T, store string) func(env []string) *exec.Cmd
}

var servicesDir = filepath.Join("..", "testdata", "services")

var pythonService = serviceLang{name: "python", start: func(t *testing.T, store string) func([]string) *exec.Cmd {
	module := map[string]string{"postgres": "psycopg2", "mysql": "pymysql"}[store]
	py := pythonWith(module)
	if py == "" {
		testenv.Missing(t, "no python3 imports "+module+": apt-get install -y python3-psycopg2 python3-pymysql (looked in python3 on PATH and /usr/bin/python3)")
	}
	return func(env []string) *exec.Cmd {
		cmd := exec.Command(py, "-B", "coupons.py")
		cmd.Dir = filepath.Join(servicesDir, "python")
		cmd.Env = append(env, "PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1")
		return cmd
	}
}}

// pythonWith is the first python3 that imports module: Debian's packages
// install into /usr/bin/python3's path, which a python3 earlier on PATH
// (pyenv, a virtualenv) may not see.
func pythonWith(module string) string {
	var seen []string
	for _, name := range []string{"python3", "/usr/bin/python3"} {
		bin, err := exec.LookPath(name)
		if err != nil {
			continue
		}
		if real, err := filepath.EvalSymlinks(bin); err == nil {
			bin = real
		}
		dup := false
		for _, s := range seen {
			dup = dup || s == bin
		}
		if dup {
			continue
		}
		seen = append(seen, bin)
		if exec.Command(bin, "-c", "import "+module).Run() == nil {
			return bin
		}
	}
	return ""
}

var nodeService = serviceLang{name: "node", start: func(t *testing.T, store string) func([]string) *exec.Cmd {
	node, err := exec.LookPath("node")
	if err != nil {
		testenv.Missing(t, "node not found: install Node.js 18 or later (Debian: apt-get install -y nodejs npm), then npm ci --prefix testdata/services/node")
	}
	dir := filepath.Join(servicesDir, "node")
	module := map[string]string{"postgres": "pg", "mysql": "mysql2"}[store]
	if _, err := os.Stat(filepath.Join(dir, "node_modules", module, "package.json")); err != nil {
		testenv.Missing(t, "testdata/services/node has no node_modules/"+module+": npm ci --prefix testdata/services/node")
	}
	return func(env []string) *exec.Cmd {
		cmd := exec.Command(node, "server.js")
		cmd.Dir = dir
		cmd.Env = env
		return cmd
	}
}}

// couponService is one service process, its proxy and its tables.
type couponService struct {
	store, prefix string
	url           string // the service's base URL
	conn          string // the effects check's connection (direct)
	p             *proxy.Proxy
}

// newCouponService starts a proxy in front of the local store, makes the
// service's tables (dropped at the end), launches the service with
// DATABASE_URL pointed at the proxy and waits until it answers.
func newCouponService(t *testing.T, store string, command func(env []string) *exec.Cmd) *couponService {
	t.Helper()
	var upstream, driver string
	switch store {
	case "postgres":
		upstream, driver = testenv.URL("postgres"), "pgx"
	default:
		upstream, driver = testenv.URL("mysql"), "mysql"
	}
	p, err := proxy.Start(context.Background(), proxy.Config{Upstream: upstream})
	var ue *proxy.UpstreamError
	if errors.As(err, &ue) {
		testenv.Unavailable(t, store, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	direct, err := sql.Open(driver, upstream)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { direct.Close() })
	if err := direct.Ping(); err != nil {
		testenv.Unavailable(t, store, err)
	}

	var b [4]byte
	rand.Read(b[:])
	s := &couponService{store: store, prefix: "racetest_svc_" + hex.EncodeToString(b[:]) + "_", conn: upstream, p: p}
	for _, ddl := range []string{
		"CREATE TABLE %scoupons (code VARCHAR(64) PRIMARY KEY, uses_left INT NOT NULL)",
		"CREATE TABLE %sredemptions (code VARCHAR(64) NOT NULL)",
		"CREATE TABLE %sredemptions_unique (code VARCHAR(64) NOT NULL UNIQUE)",
	} {
		q := fmt.Sprintf(ddl, s.prefix)
		table := strings.Fields(q)[2]
		if _, err := direct.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		t.Cleanup(func() {
			if _, err := direct.Exec("DROP TABLE " + table); err != nil {
				t.Errorf("dropping %s: %v", table, err)
			}
		})
	}

	dbURL := p.ServiceURL()
	if store == "mysql" {
		// The services take a URL; the proxy rewrites the DSN it was given.
		cfg, err := sqldb.MySQLConfig(upstream)
		if err != nil {
			t.Fatal(err)
		}
		u := url.URL{Scheme: "mysql", User: url.UserPassword(cfg.User, cfg.Passwd), Host: p.Addr(), Path: "/" + cfg.DBName}
		if cfg.Passwd == "" {
			u.User = url.User(cfg.User)
		}
		dbURL = u.String()
	}
	cmd := command(append(os.Environ(), "DATABASE_URL="+dbURL, "TABLE_PREFIX="+s.prefix, "LISTEN=127.0.0.1:0"))
	var log syncBuffer
	cmd.Stdout, cmd.Stderr = &log, &log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Closed when the process has exited; waitErr is then its end.
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	// Registered after the tables' cleanups, so run before them: the
	// service's connections are gone before its tables are dropped.
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("the service's output:\n%s", log.String())
		}
	})
	// The service prints the port it listens on, then answers /health
	// once the database does.
	client := &http.Client{Timeout: 5 * time.Second}
	listening := regexp.MustCompile(`listening on (127\.0\.0\.1:\d+)`)
	err = errors.New("it has not said where it listens")
	for end := time.Now().Add(60 * time.Second); ; {
		if m := listening.FindStringSubmatch(log.String()); m != nil {
			s.url = "http://" + m[1]
			resp, gerr := client.Get(s.url + "/health")
			err = gerr
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return s
				}
				err = fmt.Errorf("/health: %s", resp.Status)
			}
		}
		select {
		case <-exited:
			t.Fatalf("the service exited before it answered (%v)", waitErr) // its output: below
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(end) {
			t.Fatalf("the service did not answer within 60s: %v", err)
		}
	}
}

// run issues a coupon before each burst (the setup request) and fires 20
// bursts of 2 at its redemption by variant, through the proxy, counting
// the redemptions in the store.
func (s *couponService) run(t *testing.T, variant string) *runner.Result {
	t.Helper()
	table := s.prefix + "redemptions"
	if variant == "unique" {
		table += "_unique"
	}
	p := params()
	p.Conn.Set(s.store, s.conn)
	target, err := httpfire.New(httpfire.Config{
		Method:  "POST",
		URL:     s.url + "/" + variant + "/redeem?code={{.Token}}",
		Setup:   "POST " + s.url + "/coupons?code={{.Token}}",
		Release: httpfire.LastByte,
		Effects: "sql:" + s.store + ":SELECT count(*) FROM " + table + " WHERE code = '{{.Token}}'",
		Proxy:   s.p.ControlAddr(),
		// Also how long the proxy may hold a burst: generous, for a
		// loaded machine, since a hold that times out fails the test.
		Timeout: 30 * time.Second,
	}, p)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := runner.Run(ctx, target, runner.Attempts(2), runner.Bursts(20), runner.Timeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// check asserts that every burst met at the hold point, with both
// requests held at a statement beginning with held, and then that a naive
// endpoint redeemed twice in every burst, a fix once in every burst (one
// request redeemed, the other was told 409) and reads SAFE.
func (s *couponService) check(t *testing.T, res *runner.Result, race bool, held string) {
	t.Helper()
	a := report.Assess(report.Case{Expect: report.Expect{Kind: report.ExpectSafe}, Result: res})
	if len(res.Bursts) != 20 {
		t.Fatalf("%d bursts, want 20", len(res.Bursts))
	}
	for _, b := range res.Bursts {
		switch h := b.Hold; {
		case h == nil:
			t.Fatalf("burst %d has no account from the proxy", b.Index)
		case h.Untested || h.Met != 2:
			t.Errorf("burst %d: %d of %d met at the hold point, untested %v (%s): want both requests met; %s", b.Index, h.Met, h.Attempts, h.Untested, h.Why, h.Summary)
		default:
			var at []string
			for _, c := range h.Conns {
				for _, tx := range c.Transactions {
					for _, st := range tx {
						if st.Held {
							at = append(at, st.Text)
						}
					}
				}
			}
			if len(at) != 2 || !strings.HasPrefix(at[0], held) || !strings.HasPrefix(at[1], held) {
				t.Errorf("burst %d held %q, want two statements beginning %q", b.Index, at, held)
			}
		}
		want := 1
		if race {
			want = 2
		}
		if b.Effects != want || b.Outcomes[runner.Executed] != want {
			t.Errorf("burst %d: %d redemptions in the store, %d answered redeemed (outcomes %v), want %d", b.Index, b.Effects, b.Outcomes[runner.Executed], b.Outcomes, want)
		}
		if !race && b.Outcomes[runner.Declined] != 1 {
			t.Errorf("burst %d: outcomes %v, want one redeemed and one declined (409)", b.Index, b.Outcomes)
		}
	}
	want := report.Safe
	if race {
		want = report.Race
		if res.Violations() != len(res.Bursts) {
			t.Errorf("%d of %d bursts violated, want every one", res.Violations(), len(res.Bursts))
		}
	}
	if a.Verdict != want {
		t.Errorf("verdict %s (%s), want %s", a.Verdict, a.Why, want)
	}
	if t.Failed() {
		t.Logf("errors: %v", res.Errors)
		t.Logf("the first burst's account: %s", report.HoldStory(res.Bursts[0].Hold))
	}
}

// syncBuffer collects a process's output, written from os/exec's copying
// goroutines and read by the test.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
