package redisdb_test

import (
	"context"
	"errors"
	"testing"

	"github.com/racetest/racetest/internal/redisdb"
	"github.com/racetest/racetest/internal/testenv"
)

// The server's COMMAND INFO judges each command, and nothing judged is
// sent: FLUSHDB and FLUSHALL are refused here without ever reaching the
// shared server.
func TestReadsAsTheServerSays(t *testing.T) {
	rdb, p := testenv.OwnRedis(t)
	ctx := context.Background()
	rdb.SAdd(ctx, p+":s", "a", "b")
	r := redisdb.NewReads(rdb)
	for _, cmd := range [][]string{
		{"DEL", p + ":s"}, {"INCR", p + ":c"}, {"SPOP", p + ":s"}, {"FLUSHDB"}, {"FLUSHALL"}, {"SET", p + ":c", "0"},
		{"EVAL", "return 1", "0"}, {"MULTI"}, {"EXEC"}, {"CONFIG", "SET", "maxmemory", "1"}, {"OBJECT"}, {"NOSUCHCOMMAND"},
	} {
		var we *redisdb.WriteError
		if err := r.Check(ctx, [][]string{cmd}); !errors.As(err, &we) {
			t.Errorf("%v: %v, want it refused", cmd, err)
		}
	}
	if err := r.Check(ctx, [][]string{{"GET", p + ":c"}, {"SCARD", p + ":s"}, {"LLEN", p + ":l"}, {"EXISTS", p + ":s"},
		{"ZCARD", p + ":z"}, {"EVAL_RO", "return 1", "0"}, {"object", "encoding", p + ":s"}, {"DBSIZE"}}); err != nil {
		t.Errorf("reads refused: %v", err)
	}
	if n := rdb.SCard(ctx, p+":s").Val(); n != 2 {
		t.Errorf("the set holds %d members, want 2: a judged command was sent", n)
	}
}
