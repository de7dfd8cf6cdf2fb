package mongodb

import (
	"fmt"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// ReadOnlyRule is what a check that would write is told.
const ReadOnlyRule = "--effects and --invariant only read; put writes in --setup"

// readCommands are the commands a check may run: each only reads (an
// aggregate only without $out or $merge).
var readCommands = []string{"find", "count", "distinct", "aggregate"}

// WriteError is a check's command that is not a read: it was not sent.
type WriteError struct {
	Command string
	Why     string
}

func (e *WriteError) Error() string {
	return fmt.Sprintf("%q %s: %s (a check runs %s)", e.Command, e.Why, ReadOnlyRule, strings.Join(readCommands, ", "))
}

// CheckRead refuses a command document that is not a read: its command
// (its first key) must be one of readCommands, and an aggregate may not
// hold a $out or $merge stage anywhere in it.
func CheckRead(cmd bson.D) error {
	if len(cmd) == 0 {
		return nil
	}
	name := cmd[0].Key
	read := false
	for _, r := range readCommands {
		if strings.EqualFold(name, r) {
			read = true
		}
	}
	if !read {
		return &WriteError{Command: name, Why: "is not a read"}
	}
	if strings.EqualFold(name, "aggregate") {
		if stage := writeStage(cmd); stage != "" {
			return &WriteError{Command: name, Why: "with a " + stage + " stage writes"}
		}
	}
	return nil
}

// CheckReadJSON is CheckRead of a command written as Extended JSON; a
// document that does not parse is left to the server's refusal.
func CheckReadJSON(text string) error {
	var d bson.D
	if err := bson.UnmarshalExtJSON([]byte(text), false, &d); err != nil {
		return nil
	}
	return CheckRead(d)
}

// writeStage finds a $out or $merge key anywhere in v.
func writeStage(v any) string {
	switch x := v.(type) {
	case bson.D:
		for _, e := range x {
			if e.Key == "$out" || e.Key == "$merge" {
				return e.Key
			}
			if s := writeStage(e.Value); s != "" {
				return s
			}
		}
	case bson.A:
		for _, e := range x {
			if s := writeStage(e); s != "" {
				return s
			}
		}
	case []any:
		for _, e := range x {
			if s := writeStage(e); s != "" {
				return s
			}
		}
	}
	return ""
}
