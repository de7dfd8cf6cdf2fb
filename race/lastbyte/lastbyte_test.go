package lastbyte

import (
	"strings"
	"testing"
)

func TestNewNamesTheKnownProtocols(t *testing.T) {
	for _, p := range []string{"mysql", "MariaDB", "postgres", "pgx", "redis", " mongodb "} {
		if _, err := New(p); err != nil {
			t.Errorf("New(%q): %v", p, err)
		}
	}
	_, err := New("cassandra")
	if err == nil || !strings.Contains(err.Error(), `unknown protocol "cassandra" (known: mysql, postgres, redis, mongo)`) {
		t.Errorf("New(cassandra) = %v, want an error naming the known protocols", err)
	}
}
