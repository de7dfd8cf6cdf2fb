// Package redisdb is what every part of racetest that opens a go-redis
// client shares, whichever part opens it (the redis backend, the incidents
// and anomalies on Redis, scripts, HTTP effects, the benchmarks): the
// default address, how a URL is shown without its password, and the client
// settings a run needs. It is beside internal/sqldb, and like it holds no
// scenario.
package redisdb

import (
	"context"
	"crypto/tls"
	"net"
	"net/url"
	"regexp"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/racetest/racetest/scenarios"
)

// DefaultURL is the server racetest uses when --redis-url and
// RACETEST_REDIS_URL are both empty: the standard local port, database 0.
const DefaultURL = "redis://127.0.0.1:6379/0"

// Redact returns the Redis URL with its password replaced by "xxxxx", for
// errors and reports.
func Redact(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	return userinfoPassword.ReplaceAllString(raw, "${1}xxxxx@")
}

// userinfoPassword finds "scheme://user:password@" in a URL url.Parse
// rejected; the password may itself hold ':' or '/', so it runs to the last '@'.
var userinfoPassword = regexp.MustCompile(`^([^:/]*://[^:@/]*:).*@`)

// ForRun sets what every go-redis client of a run needs, whichever part of
// racetest opens it (DialTimeout and the pool are the caller's):
//   - the attempt's context bounds each call: without it go-redis bounds a
//     call by ReadTimeout only (3-5 s), and an attempt against a hung
//     server would outlive its per-attempt timeout;
//   - one dial per connection: the default of five, with backoff, turns an
//     unreachable server into a 15 s wait;
//   - no retries, whatever the URL says: a write retried after a timeout
//     may have been applied the first time, and would be counted twice (0
//     means "the default of 3" to go-redis; -1 means none);
//   - a handshake of one HELLO: no CLIENT SETINFO and no maintenance
//     notification probe, so nothing but the attempt's own request crosses
//     a connection during a burst;
//   - pipelines, MULTI/EXEC included, on the client's own connections:
//     go-redis 9.23 sends them through a pool of their own, dialled on first
//     use outside the worker's session, where the last-byte release never
//     sees them (lost-update's atomic variant held 0 of 400);
//   - with dial set, every connection dialled through the run's Dial hook.
func ForRun(opt *redis.Options, dial scenarios.DialFunc) {
	opt.ContextTimeoutEnabled = true
	opt.DialerRetries = 1
	opt.MaxRetries = -1
	opt.DisableIdentity = true
	opt.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	opt.PipelinePoolSize = -1
	if dial != nil {
		opt.Dialer = DialVia(dial, opt.TLSConfig)
	}
}

// DialVia dials through the run's Dial hook. go-redis applies TLS only in its
// own dialer, so a rediss:// URL gets its handshake here.
func DialVia(dial scenarios.DialFunc, cfg *tls.Config) func(context.Context, string, string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		nc, err := dial(ctx, network, addr)
		if err != nil || cfg == nil {
			return nc, err
		}
		tc := tls.Client(nc, cfg.Clone())
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, err
		}
		return tc, nil
	}
}

// QuietDriverLog silences go-redis's own log, which writes to stderr when a
// dial fails — failures racetest reports as errors, in words the user can
// act on. The log is global to the process, so only the command line,
// which owns the process, should call this (and tests); a library user
// keeps the driver's log unless it asks otherwise.
func QuietDriverLog() { logging.Disable() }
