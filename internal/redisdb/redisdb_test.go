package redisdb_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/racetest/racetest/internal/redisdb"
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
