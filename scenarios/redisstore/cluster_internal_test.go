package redisstore

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/racetest/racetest/internal/redisdb"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/runs"
)

// TestClusterURLForms: both seed forms give go-redis every seed, with the
// credentials; a plain URL is not a cluster URL (a node is known only by
// asking it); a cluster URL naming a database other than 0 is refused.
func TestClusterURLForms(t *testing.T) {
	for raw, want := range map[string][]string{
		"redis://u:pw@127.0.0.1:17000,127.0.0.1:17001,127.0.0.1:17002/0": {"127.0.0.1:17000", "127.0.0.1:17001", "127.0.0.1:17002"},
		"redis://u:pw@127.0.0.1:17000?addr=127.0.0.1:17001":              {"127.0.0.1:17000", "127.0.0.1:17001"},
		"redis://u:pw@10.0.0.1:7000,10.0.0.2:7000?addr=10.0.0.3:7000":    {"10.0.0.1:7000", "10.0.0.2:7000", "10.0.0.3:7000"},
		"redis://u:pw@[::1]:7000?addr=[::1]:7001":                        {"[::1]:7000", "[::1]:7001"},
	} {
		if !IsClusterURL(raw) {
			t.Errorf("IsClusterURL(%s) = false", raw)
			continue
		}
		co, err := parseClusterURL(raw)
		if err != nil {
			t.Errorf("%s: %v", raw, err)
			continue
		}
		if !reflect.DeepEqual(co.Addrs, want) || co.Username != "u" || co.Password != "pw" {
			t.Errorf("%s: addrs %v user %q password %q, want %v u pw", raw, co.Addrs, co.Username, co.Password, want)
		}
		c, err := parseConn(scenarios.Params{Conn: scenarios.NewConnections(map[string]string{"redis": raw})})
		if err != nil || c.cluster == nil {
			t.Errorf("parseConn(%s): cluster %v, err %v", raw, c != nil && c.cluster != nil, err)
		}
	}
	for _, raw := range []string{redisdb.DefaultURL, "redis://127.0.0.1:17000/0", "rediss://u:pw@host:6380/2", "unix:///tmp/redis.sock"} {
		if IsClusterURL(raw) {
			t.Errorf("IsClusterURL(%s) = true for one server's URL", raw)
		}
	}
	for raw, why := range map[string]string{
		"redis://u:secret@127.0.0.1:17000,127.0.0.1:17001/3":    "database 3",
		"redis://u:secret@127.0.0.1:17000?addr=h:1&db=2":        "database 2",
		"redis://u:secret@127.0.0.1,127.0.0.1:17001/0":          `"127.0.0.1" is not host:port`,
		"redis://u:secret@127.0.0.1:17000?addr=h:1&pool_size=x": "pool_size",
	} {
		_, err := parseConn(scenarios.Params{Conn: scenarios.NewConnections(map[string]string{"redis": raw})})
		var bad *scenarios.ParamError
		if !errors.As(err, &bad) || !strings.Contains(err.Error(), why) || !strings.Contains(err.Error(), "addr=") {
			t.Errorf("%s: want a ParamError saying %q and showing the ?addr= form, got %v", raw, why, err)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: the password leaked: %v", raw, err)
		}
	}
}

// TestNodeOptionsKeepCredentials: a session's connection to the run's
// primary logs in as the cluster URL says, with racetest's own bounds.
func TestNodeOptionsKeepCredentials(t *testing.T) {
	c, err := parseConn(scenarios.Params{Conn: scenarios.NewConnections(map[string]string{"redis": "rediss://u:pw@10.0.0.1:7000?addr=10.0.0.2:7000&dial_timeout=7"})})
	if err != nil {
		t.Fatal(err)
	}
	c.node = "10.0.0.2:7000"
	o := c.options(8, true)
	if o.Addr != c.node || o.Username != "u" || o.Password != "pw" || o.TLSConfig == nil || o.DialTimeout.Seconds() != 7 {
		t.Errorf("node options: addr %s user %q password %q tls %v dial timeout %s", o.Addr, o.Username, o.Password, o.TLSConfig != nil, o.DialTimeout)
	}
	if o.PoolSize != 8 || o.MinIdleConns != 8 || o.MaxRetries != -1 || !o.ContextTimeoutEnabled || !o.DisableIdentity {
		t.Errorf("node options lost racetest's settings: %+v", o)
	}
	co := c.clusterOptions(2)
	if co.MaxRetries != -1 || !co.ContextTimeoutEnabled || co.PoolSize != 2 || co.Password != "pw" {
		t.Errorf("cluster options lost racetest's settings: %+v", co)
	}
}

// crc16 is Redis Cluster's key hash (CRC-16/XMODEM), written out here so the
// test does not trust the code it checks, nor go-redis's internal copy.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// keySlot is the hash slot of key as Redis Cluster computes it: the part in
// the first {…} when it is not empty, else the whole key.
func keySlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key) % 16384)
}

func TestKeySlotMatchesRedis(t *testing.T) {
	// Values from the Redis Cluster specification and CLUSTER KEYSLOT.
	for key, want := range map[string]int{"123456789": 12739, "foo": 12182, "{user1000}.following": 3443, "foo{}{bar}": 8363, "{}bar": 6479} {
		if got := keySlot(key); got != want {
			t.Errorf("keySlot(%q) = %d, want %d", key, got, want)
		}
	}
}

// TestClusterKeysInOneSlot: on a cluster every key a run writes (each burst's
// two, which one script touches together, and the lease's liveness probe)
// is in the one slot of the run's hash tag, and under the run's prefix where
// cleanup and clean look; on one server the keys are as they always were.
func TestClusterKeysInOneSlot(t *testing.T) {
	for _, id := range []string{"a1", scenarios.NewRunID(), scenarios.NewRunID(), "zz99"} {
		tg := &target{p: scenarios.Params{RunID: id}, cluster: &clusterInfo{}}
		want := keySlot(hashTag(id))
		var all []string
		for b := range 200 {
			k := burstKeys(tg.keyPrefix(), b)
			all = append(all, k.subject, k.effects)
		}
		all = append(all, tg.keyPrefix()+"liveness0:lease")
		for _, k := range all {
			if got := keySlot(k); got != want {
				t.Fatalf("run %s: key %s in slot %d, the run's tag in %d", id, k, got, want)
			}
			if !strings.HasPrefix(k, runs.Prefix(id)) {
				t.Fatalf("run %s: key %s is not under the run's prefix %s", id, k, runs.Prefix(id))
			}
			if got, ok := runs.RunOf(k); !ok || got != id {
				t.Fatalf("run %s: clean reads key %s as run %q", id, k, got)
			}
		}
		one := &target{p: scenarios.Params{RunID: id}}
		if k := burstKeys(one.keyPrefix(), 3); k.subject != runs.Prefix(id)+"b3:subject" || k.effects != runs.Prefix(id)+"b3:effects" {
			t.Errorf("one server's keys changed: %+v", k)
		}
	}
}
