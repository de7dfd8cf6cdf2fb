package testenv_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/racetest/racetest/internal/testenv"
)

// recorder is a test that records how it ends, the first time, instead
// of ending (a real Skipf or Fatalf does not return).
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Skipf(format string, args ...any) {
	if r.skipped+r.failed == "" {
		r.skipped = fmt.Sprintf(format, args...)
	}
}
func (r *recorder) Fatalf(format string, args ...any) {
	if r.skipped+r.failed == "" {
		r.failed = fmt.Sprintf(format, args...)
	}
}

// An absent server skips, naming the variable to set (and the default
// when it is unset); under RACETEST_REQUIRE_SERVERS it fails instead.
func TestUnavailableSkipsOrFails(t *testing.T) {
	t.Setenv("RACETEST_POSTGRES_URL", "")
	t.Setenv(testenv.RequireEnv, "")
	r := &recorder{TB: t}
	testenv.Unavailable(r, "postgres", errors.New("refused"))
	if r.failed != "" || !strings.Contains(r.skipped, "set RACETEST_POSTGRES_URL") || !strings.Contains(r.skipped, "the default is postgres://") ||
		!strings.Contains(r.skipped, "refused") || !strings.Contains(r.skipped, "RACETEST_REQUIRE_SERVERS=1") {
		t.Errorf("unset: skipped %q, failed %q", r.skipped, r.failed)
	}
	t.Setenv("RACETEST_POSTGRES_URL", "postgres://u:secret@h:1/x")
	r = &recorder{TB: t}
	testenv.Unavailable(r, "postgres", errors.New("refused"))
	if !strings.Contains(r.skipped, "set RACETEST_POSTGRES_URL") || strings.Contains(r.skipped, "default") || strings.Contains(r.skipped, "secret") {
		t.Errorf("set: skipped %q", r.skipped)
	}
	t.Setenv(testenv.RequireEnv, "1")
	r = &recorder{TB: t}
	testenv.Unavailable(r, "mysql or postgres", errors.New("refused"))
	if r.skipped != "" || !strings.Contains(r.failed, "mysql or postgres server unavailable") || !strings.Contains(r.failed, testenv.RequireEnv) {
		t.Errorf("required: skipped %q, failed %q", r.skipped, r.failed)
	}
	r = &recorder{TB: t}
	testenv.Missing(r, "no chromium on PATH")
	if r.skipped != "" || !strings.Contains(r.failed, "no chromium on PATH") {
		t.Errorf("a missing tool, required: skipped %q, failed %q", r.skipped, r.failed)
	}
}

// Each backend's server is its variable, or the run's default when unset;
// Conns gives a run's connections as set (empty: the backend's default).
func TestServersFromTheEnvironment(t *testing.T) {
	t.Setenv("RACETEST_REDIS_URL", "")
	t.Setenv("RACETEST_MYSQL_DSN", "u@tcp(h:1)/x")
	if testenv.Set("redis") || testenv.URL("redis") != "redis://127.0.0.1:6379/0" || testenv.Env("redis") != "RACETEST_REDIS_URL" {
		t.Errorf("redis unset: %v %q", testenv.Set("redis"), testenv.URL("redis"))
	}
	if !testenv.Set("mysql") || testenv.URL("mysql") != "u@tcp(h:1)/x" {
		t.Errorf("mysql set: %q", testenv.URL("mysql"))
	}
	c := testenv.Conns("mysql", "redis")
	if c.Get("mysql") != "u@tcp(h:1)/x" || c.Get("redis") != "" {
		t.Errorf("Conns: mysql %q, redis %q", c.Get("mysql"), c.Get("redis"))
	}
}
