package redeem_test

import (
	"testing"

	"github.com/racetest/racetest/examples/redeem"
	"github.com/racetest/racetest/race"
	"github.com/racetest/racetest/race/lastbyte"
)

// The last-byte release with each driver, as race/lastbyte documents it:
// the release's dialer in the driver (mysql.RegisterDialContext, pgx's
// DialFunc, go-redis's Dialer, mongo-driver's SetDialer), a connection per worker in Session,
// and rel.Option() in the case. With no Work between check and write, the
// naive Redeem's gap is one round trip; releasing the first requests
// together at the wire shows it all the same.

func newRelease(t *testing.T, protocol string) *lastbyte.Release {
	t.Helper()
	rel, err := lastbyte.New(protocol)
	if err != nil {
		t.Fatal(err)
	}
	return rel
}

// released checks that the run really went out at the wire: the release
// did not fall back to the gate, and the attempts' first requests were held
// and released together.
func released(t *testing.T, rep *race.Report) {
	t.Helper()
	if rep == nil {
		return
	}
	res := rep.Result
	if res.Release != "last-byte" {
		t.Fatalf("released through %q, not last-byte; notes: %v", res.Release, res.Notes)
	}
	var held, sent int
	for _, b := range res.Bursts {
		held += b.Wire.Held
		sent += b.Wire.Held + b.Wire.Late
	}
	if sent == 0 || held*10 < sent*9 {
		t.Errorf("%d of %d first requests were held and released together, want at least 90%%; notes: %v", held, sent, res.Notes)
	}
}

func withRelease(c race.Case, rel *lastbyte.Release) race.Case {
	c.Options = append(c.Options, rel.Option())
	return c
}

func TestLastByteMySQL(t *testing.T) {
	t.Run("naive", func(t *testing.T) {
		rel := newRelease(t, "mysql")
		released(t, race.ExpectRace(t, withRelease(sqlCase(t, openMySQL(t, attempts+2, rel.DialMySQL), redeem.MySQL, naiveSQL), rel)))
	})
	t.Run("fixed", func(t *testing.T) {
		rel := newRelease(t, "mysql")
		released(t, race.Test(t, withRelease(sqlCase(t, openMySQL(t, attempts+2, rel.DialMySQL), redeem.MySQL, fixedSQL), rel)))
	})
}

func TestLastBytePostgres(t *testing.T) {
	t.Run("naive", func(t *testing.T) {
		rel := newRelease(t, "postgres")
		released(t, race.ExpectRace(t, withRelease(sqlCase(t, openPostgres(t, attempts+2, rel.Dial), redeem.Postgres, naiveSQL), rel)))
	})
	t.Run("fixed", func(t *testing.T) {
		rel := newRelease(t, "postgres")
		released(t, race.Test(t, withRelease(sqlCase(t, openPostgres(t, attempts+2, rel.Dial), redeem.Postgres, fixedSQL), rel)))
	})
}

func TestLastByteRedis(t *testing.T) {
	t.Run("naive", func(t *testing.T) {
		rel := newRelease(t, "redis")
		released(t, race.ExpectRace(t, withRelease(redisCase(t, redisOptions(t), rel.Dial, naiveRedis), rel)))
	})
	t.Run("fixed", func(t *testing.T) {
		rel := newRelease(t, "redis")
		released(t, race.Test(t, withRelease(redisCase(t, redisOptions(t), rel.Dial, fixedRedis), rel)))
	})
}
