package bench

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Launcher is a fan-out as a user writes it for one server: the driver's
// ordinary calls, one goroutine per attempt on a connection opened before
// the burst, every goroutine parked on one channel that the burst closes.
// The bench holds the default release to it as to the naive launcher
// (Report.Checks): racetest must never expose fewer races than the code a
// user would write by hand.
//
// The statements are the scenario's, sent as the driver sends them by
// default — with one exception, said in Idiom: where the driver's default
// would add a round trip between the check and the write (go-sql-driver
// without interpolateParams prepares every statement with arguments), the
// launcher would be measured on a wider window than the modes it is
// compared with, so it interpolates, as racetest's scenario does.
type Launcher struct {
	// Name is the mode's name in the table (user-pgx, user-sql, user-redis).
	Name string
	// Idiom says, in a line, how the attempt is written.
	Idiom string
}

// Launchers of each backend, in the order the table shows them.
var launchersOf = map[string][]Launcher{
	"postgres": {
		{Name: UserPgx, Idiom: "pgx.Conn per goroutine (pgx's defaults: statements prepared and cached); tx := conn.Begin(ctx) " +
			"as its own round trip, tx.QueryRow(SELECT), tx.Exec(INSERT), tx.Commit"},
		{Name: UserSQL, Idiom: "database/sql over pgx's stdlib, pool of N idle connections; tx := db.BeginTx(ctx, nil) " +
			"(its own round trip), tx.QueryRowContext(SELECT), tx.ExecContext(INSERT), tx.Commit"},
	},
	"mysql": {
		{Name: UserSQL, Idiom: "database/sql over go-sql-driver, pool of N idle connections; tx := db.BeginTx(ctx, nil) " +
			"(its own round trip), tx.QueryRowContext(SELECT), tx.ExecContext(INSERT), tx.Commit (interpolateParams, as the scenario)"},
	},
	"redis": {
		{Name: UserRedis, Idiom: "one go-redis client with its defaults, its pool warmed; client.Exists(key), then client.RPush(key)"},
	},
}

// The user-style launchers' mode names.
const (
	UserPgx   = "user-pgx"
	UserSQL   = "user-sql"
	UserRedis = "user-redis"
)

// AllModes are every mode name the bench knows: the release modes, the
// naive launcher, every backend's user-style launchers, the HTTP modes and
// the proxy, each once.
func AllModes() []string {
	out := Modes()
	for _, b := range Backends {
		for _, l := range launchersOf[b] {
			if !slices.Contains(out, l.Name) {
				out = append(out, l.Name)
			}
		}
	}
	for _, m := range append(HTTPModes(), Proxy) {
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

// LaunchersOf lists the user-style launchers the bench runs on backend.
func LaunchersOf(backend string) []Launcher { return launchersOf[backend] }

// IsLauncher reports whether mode is a hand-written launcher (the naive one
// or a user-style one): a mode the default release is checked against.
func IsLauncher(mode string) bool {
	if mode == Naive || mode == UserHTTP {
		return true
	}
	for _, ls := range launchersOf {
		for _, l := range ls {
			if l.Name == mode {
				return true
			}
		}
	}
	return false
}

// userPool is one user-style launcher's connections for one N: one per
// worker, opened and warmed before the first burst.
type userPool interface {
	// checkThenWrite is the scenario's check and write on worker's
	// connection, in the launcher's idiom.
	checkThenWrite(ctx context.Context, token string, worker int) error
	// arrive is the calibration attempt in the same idiom: the transaction
	// opened as the launcher opens it, then the server's clock read where
	// the check would be.
	arrive(ctx context.Context, worker int) (int64, error)
	close()
}

// userBurst fires n attempts as a Go test written by hand usually does:
// a goroutine per attempt, each signalling that it is ready and parking on
// one channel, which is closed once all are ready. Spread and overlap are
// measured as naiveBurst measures them, from each goroutine's wake-up.
func userBurst(ctx context.Context, n int, attempt func(ctx context.Context, worker int) error) (spread time.Duration, overlap int, errs int) {
	starts := make([]time.Time, n)
	ends := make([]time.Time, n)
	failed := make([]bool, n)
	start := make(chan struct{})
	var ready, done sync.WaitGroup
	ready.Add(n)
	done.Add(n)
	for i := range n {
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			starts[i] = time.Now()
			failed[i] = attempt(ctx, i) != nil
			ends[i] = time.Now()
		}()
	}
	ready.Wait()
	close(start)
	done.Wait()
	return burstFigures(starts, ends, failed)
}
