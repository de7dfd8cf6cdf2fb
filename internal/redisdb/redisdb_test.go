package redisdb_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/racetest/racetest/internal/redisdb"
	"github.com/racetest/racetest/scenarios"
)

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"redis://127.0.0.1:6379/0":         "redis://127.0.0.1:6379/0",
		"redis://user:pw@h:6379/1":         "redis://user:xxxxx@h:6379/1",
		"rediss://:pw@h:6380":              "rediss://:xxxxx@h:6380",
		"redis://u:p%40ss@h/0":             "redis://u:xxxxx@h/0",
		"redis://u:pa ss@h:bad port/0":     "redis://u:xxxxx@h:bad port/0",
		"redis://u:we/ird:pw@h:notaport/0": "redis://u:xxxxx@h:notaport/0",
	} {
		if got := redisdb.Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
	if got := redisdb.Redact("redis://u:secret@127.0.0.1:17000,127.0.0.1:17001/0"); strings.Contains(got, "secret") {
		t.Errorf("Redact left the password in a comma URL: %s", got)
	}
}

// TestForRun: the settings a run's client cannot do without.
func TestForRun(t *testing.T) {
	opt := &redis.Options{MaxRetries: 5}
	redisdb.ForRun(opt, nil)
	if !opt.ContextTimeoutEnabled || opt.DialerRetries != 1 || opt.MaxRetries != -1 || !opt.DisableIdentity ||
		opt.PipelinePoolSize != -1 || opt.Dialer != nil {
		t.Errorf("without a dial hook: %+v", opt)
	}
	redisdb.ForRun(opt, func(context.Context, string, string) (net.Conn, error) { return nil, errors.New("dialled") })
	if opt.Dialer == nil {
		t.Fatal("a dial hook is not used")
	}
	if _, err := opt.Dialer(context.Background(), "tcp", "h:1"); err == nil || err.Error() != "dialled" {
		t.Errorf("the dialer is not the hook: %v", err)
	}
}

func TestServerName(t *testing.T) {
	for info, want := range map[string]string{
		"# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\n":                     "Redis 7.0.15",
		"# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:8.0.1\r\n": "Valkey 8.0.1",
		"# Server\r\nredis_version:6.2.11\r\ndragonfly_version:df-v1.21.2\r\n":              "Dragonfly df-v1.21.2",
		"# Server\r\n": "Redis-compatible server (no version in INFO)",
	} {
		if got := redisdb.ServerName(info); got != want {
			t.Errorf("ServerName(%q) = %q, want %q", info, got, want)
		}
	}
}

// SCAN's MATCH is a glob: a prefix's glob characters are escaped.
func TestGlobEscape(t *testing.T) {
	if got, want := redisdb.GlobEscape(`racetest_a*b?[c]\d^e-f_`), `racetest_a\*b\?\[c\]\\d\^e\-f_`; got != want {
		t.Errorf("GlobEscape = %s, want %s", got, want)
	}
}

// RunOptions: the default URL when none is given, the URL's own dial
// timeout kept, ConnectTimeout otherwise, ForRun's settings, and a URL that
// does not parse refused without its password.
func TestRunOptions(t *testing.T) {
	if got := redisdb.RunURL(""); got != redisdb.DefaultURL {
		t.Errorf("RunURL(\"\") = %s", got)
	}
	if got := redisdb.RunURL("redis://h:1/2"); got != "redis://h:1/2" {
		t.Errorf("RunURL kept nothing: %s", got)
	}
	opt, err := redisdb.RunOptions("redis://h:1/2", nil)
	if err != nil || opt.Addr != "h:1" || opt.DB != 2 || opt.DialTimeout != redisdb.ConnectTimeout || opt.MaxRetries != -1 {
		t.Errorf("RunOptions: %+v, %v", opt, err)
	}
	if opt, err := redisdb.RunOptions("redis://h:1/0?dial_timeout=7s", nil); err != nil || opt.DialTimeout != 7*time.Second {
		t.Errorf("the URL's dial timeout: %v, %v", opt.DialTimeout, err)
	}
	_, err = redisdb.RunOptions("redis://u:secret@h:1/x", nil)
	if err == nil || strings.Contains(err.Error(), "secret") || !strings.Contains(err.Error(), "RACETEST_REDIS_URL") || !errors.As(err, new(*scenarios.ParamError)) {
		t.Errorf("a bad URL: %v", err)
	}
}
