package redisdb

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/racetest/racetest/scenarios"
)

// ConnectTimeout bounds dialling and the first PING of racetest's own
// connections, unless the URL sets a dial timeout: an unreachable server is
// reported in seconds.
const ConnectTimeout = 3 * time.Second

// RunURL is a run's Redis URL as its connections give it (--redis-url), or
// DefaultURL when they give none.
func RunURL(raw string) string {
	if raw == "" {
		return DefaultURL
	}
	return raw
}

// RunOptions reads raw, the URL of one Redis server, into the options of
// every client racetest opens to it for a run: ForRun's settings (with the
// run's dial hook), and ConnectTimeout to dial unless the URL sets one. A URL
// that does not parse is a bad parameter, shown redacted: the parser's own
// error may quote the password.
func RunOptions(raw string, dial scenarios.DialFunc) (*redis.Options, error) {
	opt, err := redis.ParseURL(raw)
	if err != nil {
		return nil, scenarios.BadParam(fmt.Errorf("redis: cannot use the URL %s — set --redis-url or RACETEST_REDIS_URL to a URL like %s",
			Redact(raw), DefaultURL))
	}
	if opt.DialTimeout == 0 {
		opt.DialTimeout = ConnectTimeout
	}
	ForRun(opt, dial)
	return opt, nil
}

// Ping has cl's server answer a PING within ConnectTimeout. cl is a client,
// a pool's connection or a cluster's node.
func Ping(ctx context.Context, cl interface {
	Ping(context.Context) *redis.StatusCmd
}) error {
	pctx, cancel := context.WithTimeout(ctx, ConnectTimeout)
	defer cancel()
	return cl.Ping(pctx).Err()
}

// ServerName names the product and version an INFO server reply describes
// ("Redis 7.2.4", "Valkey 8.0.1"). Forks keep redis_version for
// compatibility and name themselves elsewhere.
func ServerName(info string) string {
	fields := map[string]string{}
	for _, line := range strings.Split(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			fields[k] = v
		}
	}
	if name := fields["server_name"]; name != "" && name != "redis" {
		if v := fields[name+"_version"]; v != "" {
			return strings.ToUpper(name[:1]) + name[1:] + " " + v
		}
	}
	if v := fields["dragonfly_version"]; v != "" {
		return "Dragonfly " + v
	}
	if v := fields["redis_version"]; v != "" {
		return "Redis " + v
	}
	return "Redis-compatible server (no version in INFO)"
}

// GlobEscape quotes the characters Redis glob patterns (SCAN's MATCH, KEYS)
// give a meaning to, so that a prefix matches only itself.
func GlobEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\^-`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
