package sqldb

import (
	"fmt"
	"strings"
)

// Isolation is a transaction isolation level by its command-line name
// ("read-committed", ...); "" is the server's default.
type Isolation string

const (
	ReadUncommitted Isolation = "read-uncommitted"
	ReadCommitted   Isolation = "read-committed"
	RepeatableRead  Isolation = "repeatable-read"
	Serializable    Isolation = "serializable"
)

// Isolations lists the levels, weakest first.
func Isolations() []Isolation {
	return []Isolation{ReadUncommitted, ReadCommitted, RepeatableRead, Serializable}
}

// IsolationNames lists the levels' names, weakest first, for help text
// and a backend's declaration of the levels it accepts.
func IsolationNames() []string {
	var names []string
	for _, l := range Isolations() {
		names = append(names, string(l))
	}
	return names
}

// ParseIsolation reads a level as a user may spell it ("REPEATABLE_READ",
// "repeatable read", "repeatable-read"); "" is the server's default.
func ParseIsolation(s string) (Isolation, error) {
	if s == "" {
		return "", nil
	}
	l := Isolation(strings.ToLower(strings.NewReplacer("_", "-", " ", "-").Replace(s)))
	for _, k := range Isolations() {
		if l == k {
			return l, nil
		}
	}
	return "", fmt.Errorf("unknown isolation level %q (known: read-uncommitted, read-committed, repeatable-read, serializable)", s)
}

// SQL spells the level as SQL statements do ("REPEATABLE READ"); "" for the
// server's default.
func (l Isolation) SQL() string {
	return strings.ToUpper(strings.ReplaceAll(string(l), "-", " "))
}
