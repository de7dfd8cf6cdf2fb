package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"time"

	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/redisstore"
)

// The HTTP targets in a process of their own.
//
// Served from the bench's own process, a target's handlers share the Go
// runtime (its Ps, two here) with the client firing at them. There auto
// fell behind HTTP/1.1 on http-redis: the quick check failed in 11 of 100
// runs (N=20), against 0 of 100 with the target in a process of its own
// (docs/measurements.md). HTTP/2's one read loop per connection waiting on
// the client's goroutines for a P is the likely reason; it was not proven.
// A service a team tests never runs inside racetest, so racetest bench serves
// each target from a child process, racetest itself started again with
// TargetEnv set: Config.TargetExecutable names it.

// TargetEnv, set in a process's environment, names the HTTP target
// (http-spin, http-redis, http-postgres, http-mysql) the process serves instead of doing its own work:
// ServeTargetFromEnv. The other settings travel beside it, under the same
// name with a suffix.
const TargetEnv = "RACETEST_BENCH_HTTP_TARGET"

const (
	targetPrefixEnv = TargetEnv + "_PREFIX" // the Redis keys' prefix
	targetWindowEnv = TargetEnv + "_WINDOW" // http-spin's window
	targetRedisEnv  = TargetEnv + "_REDIS"  // the Redis URL ("" is the local one)
	targetSQLEnv    = TargetEnv + "_SQL"    // the SQL server's URL or DSN ("" is the local one)
	targetProxyEnv  = TargetEnv + "_PROXY"  // the proxy's service URL, for the proxied pool
)

// ServeTargetFromEnv serves the HTTP target TargetEnv names, when it is set,
// and returns the process's exit code with ok true; when TargetEnv is not
// set it returns ok false and does nothing. The target's first line on
// standard output is its URL and what it is; it serves until its standard
// input closes (the bench is done, or gone), then deletes what it made and
// returns. Errors go to standard error, which the bench reads.
func ServeTargetFromEnv() (code int, ok bool) {
	backend := os.Getenv(TargetEnv)
	if backend == "" {
		return 0, false
	}
	// Ctrl-C reaches the whole process group: the bench stops and closes
	// this process's input, which is when it cleans up.
	signal.Ignore(os.Interrupt)
	window, err := time.ParseDuration(os.Getenv(targetWindowEnv))
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", targetWindowEnv, err)
		return 2, true
	}
	conns := map[string]string{redisstore.Name: os.Getenv(targetRedisEnv)}
	if IsSQLHTTP(backend) {
		conns[sqlStoreName(backend)] = os.Getenv(targetSQLEnv)
	}
	cfg := &Config{HTTPWindow: window, Conn: scenarios.NewConnections(conns)}
	if err := serveTarget(cfg, backend, os.Getenv(targetPrefixEnv), os.Getenv(targetProxyEnv), os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1, true
	}
	return 0, true
}

// serveTarget serves backend's target until in closes, then deletes what
// it made under prefix; it writes the target's URL and what it is to out
// first. proxied is the proxy's service URL for a database-backed
// target's proxied pool ("" for none).
func serveTarget(cfg *Config, backend, prefix, proxied string, in io.Reader, out io.Writer) error {
	ctx := context.Background()
	act, desc, err := newActor(ctx, cfg, backend, prefix, proxied)
	if err != nil {
		return err
	}
	defer act.close()
	srv, err := startHTTPServer(newHTTPTarget(act))
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%s %s\n", srv.URL, desc)
	io.Copy(io.Discard, in) //nolint:errcheck // any end of the input is the bench's
	srv.close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return act.cleanup(ctx)
}

// serveProcess serves the target from a process of its own, exe started
// with TargetEnv set: the target's goroutines then run on their own Go
// runtime, not on the client's.
func serveProcess(exe string) serveFunc {
	return func(_ context.Context, cfg *Config, backend, prefix, proxied string) (string, string, func(context.Context) error, error) {
		redisURL := cfg.Conn.Get(redisstore.Name)
		if backend == HTTPRedis {
			// A URL that cannot be read is refused here, as in process,
			// before a process is started for nothing.
			if _, err := benchRedisOptions(redisURL); err != nil {
				return "", "", nil, err
			}
		}
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), TargetEnv+"="+backend, targetPrefixEnv+"="+prefix,
			targetWindowEnv+"="+cfg.HTTPWindow.String(), targetRedisEnv+"="+redisURL,
			targetSQLEnv+"="+sqlConn(cfg.Conn, backend), targetProxyEnv+"="+proxied)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return "", "", nil, err
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return "", "", nil, err
		}
		if err := cmd.Start(); err != nil {
			return "", "", nil, fmt.Errorf("starting the HTTP target's process: %w", err)
		}
		wait := func() error {
			err := cmd.Wait()
			if msg := strings.TrimSpace(stderr.String()); msg != "" {
				return errors.New(msg)
			}
			if err != nil {
				return fmt.Errorf("the HTTP target's process: %w", err)
			}
			return nil
		}
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err != nil {
			stdin.Close()
			if werr := wait(); werr != nil {
				return "", "", nil, werr
			}
			return "", "", nil, fmt.Errorf("the HTTP target's process said nothing: %w", err)
		}
		url, desc, _ := strings.Cut(strings.TrimSpace(line), " ")
		stop := func(context.Context) error {
			stdin.Close()
			return wait()
		}
		return url, "net/http in a process of its own (HTTP/1.1 and h2c), " + desc, stop, nil
	}
}
