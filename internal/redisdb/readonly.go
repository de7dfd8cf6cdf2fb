package redisdb

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// ReadOnlyRule is what a check that would write is told.
const ReadOnlyRule = "--effects and --invariant only read; put writes in --setup"

// WriteError is a command of a check (an effects command, an invariant)
// that the server's COMMAND INFO does not flag read-only: it was not sent.
type WriteError struct {
	Command string
	Why     string
}

func (e *WriteError) Error() string {
	return fmt.Sprintf("%s %s: %s", e.Command, e.Why, ReadOnlyRule)
}

// Reads tells the commands that only read from the others, as the server
// says: a command is a read when COMMAND INFO flags it readonly, and
// neither write nor admin (EVAL is refused, EVAL_RO and FCALL_RO are
// reads: the server runs their scripts read-only). A container command
// (OBJECT, XINFO) is judged by its subcommand. What the server said is
// kept: each command costs one COMMAND INFO, once.
type Reads struct {
	c  doer
	mu sync.Mutex
	// known maps a command ("get", "object|encoding") to its refusal, or
	// nil for a read.
	known map[string]error
}

// NewReads asks c's server.
func NewReads(c doer) *Reads { return &Reads{c: c, known: map[string]error{}} }

// Check refuses the first of cmds (each a command and its arguments) that
// is not a read, asking the server in one round trip about the commands
// it has not judged yet.
func (r *Reads) Check(ctx context.Context, cmds [][]string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.ask(ctx, cmds, false); err != nil {
		return err
	}
	// A container's subcommands, now that the containers are known.
	if err := r.ask(ctx, cmds, true); err != nil {
		return err
	}
	for _, args := range cmds {
		if len(args) == 0 {
			continue
		}
		err := r.known[r.key(args)]
		if errors.Is(err, errContainer) {
			return &WriteError{Command: strings.ToUpper(args[0]), Why: "needs its subcommand, which the server judges"}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// key is the name COMMAND INFO knows args by: the command, or
// "container|subcommand".
func (r *Reads) key(args []string) string {
	name := strings.ToLower(args[0])
	if errors.Is(r.known[name], errContainer) && len(args) > 1 {
		return name + "|" + strings.ToLower(args[1])
	}
	return name
}

// doer sends a command as written (a *redis.Client).
type doer interface {
	Do(ctx context.Context, args ...any) *redis.Cmd
}

var errContainer = errors.New("is a container command")

// ask sends one COMMAND INFO for the commands (or, with subs, the
// subcommands of the containers) not yet judged.
func (r *Reads) ask(ctx context.Context, cmds [][]string, subs bool) error {
	var names []string
	seen := map[string]bool{}
	for _, args := range cmds {
		if len(args) == 0 {
			continue
		}
		k := strings.ToLower(args[0])
		if subs {
			if !errors.Is(r.known[k], errContainer) || len(args) < 2 {
				continue
			}
			k = r.key(args)
		}
		if _, ok := r.known[k]; ok || seen[k] {
			continue
		}
		seen[k] = true
		names = append(names, k)
	}
	if len(names) == 0 {
		return nil
	}
	q := []any{"COMMAND", "INFO"}
	for _, n := range names {
		q = append(q, n)
	}
	v, err := r.c.Do(ctx, q...).Slice()
	var re redis.Error
	if errors.As(err, &re) {
		// The server will not say (COMMAND renamed or denied): nothing
		// is judged a read.
		return &WriteError{Command: strings.ToUpper(names[0]), Why: fmt.Sprintf("cannot be judged: the server refused COMMAND INFO (%v), and a check runs only commands it flags read-only", err)}
	}
	if err != nil {
		return fmt.Errorf("asking the server which commands only read (COMMAND INFO): %w", err)
	}
	if len(v) != len(names) {
		return fmt.Errorf("COMMAND INFO answered %d entries for %d commands; a check runs only commands the server flags read-only", len(v), len(names))
	}
	for i, name := range names {
		r.known[name] = judge(strings.ToUpper(name), v[i])
	}
	return nil
}

// judge reads one COMMAND INFO entry: [name, arity, flags, first key,
// last key, step, categories, tips, key specs, subcommands].
func judge(name string, entry any) error {
	e, ok := entry.([]any)
	if !ok || len(e) < 3 {
		return &WriteError{Command: name, Why: "is not a command this server knows (COMMAND INFO has no entry for it)"}
	}
	flags := map[string]bool{}
	if fl, ok := e[2].([]any); ok {
		for _, f := range fl {
			flags[strings.ToLower(fmt.Sprint(f))] = true
		}
	}
	if len(e) > 9 && !flags["readonly"] {
		if subs, ok := e[9].([]any); ok && len(subs) > 0 {
			return errContainer
		}
	}
	if flags["write"] || flags["admin"] {
		return &WriteError{Command: name, Why: "is flagged write or admin by the server's COMMAND INFO"}
	}
	if !flags["readonly"] {
		return &WriteError{Command: name, Why: "is not flagged read-only by the server's COMMAND INFO"}
	}
	return nil
}
