// Package lastbyte is racetest's last-byte release for your own database
// driver. Each worker's connection sends the first request of its attempt's
// first step (the first request after its first w.Step) except the final
// byte, and parks; when every attempt has parked, one loop writes every held
// byte, so the requests are complete at the server within microseconds of
// each other, whatever the Go scheduler did.
//
// Plug the release's dialer into your driver, give each worker a connection
// of its own in Case.Session (dialled, or first written on, there: a ping
// will do), and pass rel.Option() in Case.Options:
//
//	rel, err := lastbyte.New("postgres") // or "mysql", "redis", "mongo"
//
//	// pgx (database/sql through pgx/v5/stdlib, or pgx.Connect):
//	cfg, _ := pgx.ParseConfig(url)
//	cfg.DialFunc = rel.Dial
//	db := stdlib.OpenDB(*cfg)
//
//	// go-sql-driver/mysql, by network name in the DSN:
//	mysql.RegisterDialContext("racetest", rel.DialMySQL)
//	db, _ := sql.Open("mysql", "root@racetest(127.0.0.1:3306)/test")
//	// or on a mysql.Config: cfg.DialFunc = rel.Dial
//
//	// go-redis:
//	client := redis.NewClient(&redis.Options{Addr: addr, Dialer: rel.Dial, PoolSize: 1, PipelinePoolSize: -1})
//
//	// mongo-driver v2:
//	client, _ := mongo.Connect(options.Client().ApplyURI(uri).SetDialer(rel))
//
//	race.Test(t, race.Case{..., Options: []runner.Option{rel.Option()}})
//
// A connection belongs to the worker whose Session dialled it, or first
// wrote on it; connections of no worker (your Subject and Effects, a pool's
// spares) are never held. A worker that owns no connection makes the run
// fall back to the gate release, with a note in the report saying why. A
// Release serves one run at a time, and its connections belong to it: open
// the pool a run uses with the dialer of that run's Release.
//
// The package imports no driver.
package lastbyte

import (
	"context"
	"fmt"
	"net"
	"strings"

	"github.com/racetest/racetest/release"
	"github.com/racetest/racetest/runner"
)

// Release is a last-byte release for one protocol.
type Release struct {
	wire *release.Wire
}

// protocols are the wire protocols whose first message the release knows
// how to cut, by the names people use for them.
var protocols = map[string]string{
	"mysql": "mysql", "mariadb": "mysql",
	"postgres": "postgres", "postgresql": "postgres", "pgx": "postgres",
	"redis": "redis",
	"mongo": "mongo", "mongodb": "mongo",
}

// New returns a last-byte release for protocol: "mysql" (MySQL and
// MariaDB), "postgres", "redis" or "mongo".
func New(protocol string) (*Release, error) {
	p, ok := protocols[strings.ToLower(strings.TrimSpace(protocol))]
	if !ok {
		return nil, fmt.Errorf("lastbyte: unknown protocol %q (known: mysql, postgres, redis, mongo)", protocol)
	}
	return &Release{wire: release.NewWire(p, 0)}, nil
}

// Dial dials addr and wraps the connection so the release can hold its
// requests back. It fits pgx's ConnConfig.DialFunc, go-redis's
// Options.Dialer and go-sql-driver/mysql's Config.DialFunc.
func (r *Release) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	return r.wire.Dial(ctx, network, addr)
}

// DialContext is Dial under the name mongo-driver's SetDialer wants: pass
// the Release itself.
func (r *Release) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return r.wire.Dial(ctx, network, addr)
}

// DialMySQL is Dial over TCP, for mysql.RegisterDialContext.
func (r *Release) DialMySQL(ctx context.Context, addr string) (net.Conn, error) {
	return r.wire.Dial(ctx, "tcp", addr)
}

// Option is the runner option that releases every burst through r; put it
// in race.Case.Options.
func (r *Release) Option() runner.Option { return runner.Release(r.wire) }
