package script

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/racetest/racetest/internal/redisdb"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/redisstore"
)

// rdStore runs scripts on Redis: each command is sent as written, with
// go-redis's Do.
type rdStore struct {
	url    string
	opt    *redis.Options
	admin  *rdConn
	server string
	reads  *redisdb.Reads // which commands only read, as the server says
	// snap measures the watched keys (--effects auto), telling a key
	// that expired from one deleted over the run's snapshots.
	snap redisstore.Snapshotter
}

const redisHint = "set --redis-url or RACETEST_REDIS_URL"

// scriptsOnRedis names, in the refusal of a Redis Cluster, what refuses it.
const scriptsOnRedis = "a script (racetest redis)"

// OpenRedis connects racetest's own connection to p.Conn.Get(redisstore.Name).
func OpenRedis(ctx context.Context, p scenarios.Params) (Store, error) {
	raw := redisdb.RunURL(p.Conn.Get(redisstore.Name))
	if redisstore.IsClusterURL(raw) {
		return nil, redisstore.ClusterRefusal(scriptsOnRedis)
	}
	opt, err := redisdb.RunOptions(raw, p.Dial)
	if err != nil {
		return nil, err
	}
	s := &rdStore{url: redisdb.Redact(raw), opt: opt}
	admin, err := s.open(ctx, 1)
	if err != nil {
		return nil, err
	}
	// On a cluster node most keys would meet MOVED errors.
	if err := redisstore.RefuseCluster(ctx, "", admin.cl, scriptsOnRedis); err != nil {
		admin.cl.Close()
		return nil, err
	}
	s.admin = admin
	s.reads = redisdb.NewReads(admin.cl)
	s.server = "Redis"
	if info, err := admin.cl.Info(ctx, "server").Result(); err == nil {
		s.server = redisdb.ServerName(info)
	}
	return s, nil
}

// open makes a client of one connection, pinged.
func (s *rdStore) open(ctx context.Context, _ int) (*rdConn, error) {
	o := *s.opt
	o.PoolSize, o.MaxIdleConns, o.MinIdleConns = 1, 1, 0
	cl := redis.NewClient(&o)
	if err := redisdb.Ping(ctx, cl); err != nil {
		cl.Close()
		return nil, fmt.Errorf("redis: cannot connect to %s (%v) — is the server running? %s", s.opt.Addr, err, redisHint)
	}
	return &rdConn{cl: cl}, nil
}

func (s *rdStore) Server() string { return s.server }
func (s *rdStore) Where() string {
	return fmt.Sprintf("%s at %s, database %d", s.server, s.opt.Addr, s.opt.DB)
}
func (s *rdStore) Admin() Conn     { return s.admin }
func (s *rdStore) Notes() []string { return nil }
func (s *rdStore) Close() error    { return s.admin.Close() }

func (s *rdStore) Open(context.Context, int) (Pool, error) { return rdPool{s}, nil }

type rdPool struct{ s *rdStore }

// Session gives the worker a client of its own, one connection, dialled
// and pinged now.
func (p rdPool) Session(ctx context.Context, worker int) (SessionConn, error) {
	return p.s.open(ctx, worker)
}

func (rdPool) Close() error { return nil }

type rdConn struct{ cl *redis.Client }

// Reader is racetest's own connection refusing, before it is sent, every
// command the server's COMMAND INFO does not flag read-only.
func (s *rdStore) Reader(context.Context) (Conn, func(), error) {
	return rdReader{rdConn: s.admin, reads: s.reads}, func() {}, nil
}

// preflight has the server judge a check's commands, those written whole
// (a command named by a template or a variable is judged when it runs),
// in one round trip, before the run.
func (s *rdStore) preflight(ctx context.Context, sc *Script) error {
	var cmds [][]string
	var steps []*Step
	for i := range sc.Steps {
		st := &sc.Steps[i]
		if st.Kind != Statement {
			continue
		}
		// The command's name as written: a template there is judged when
		// it runs; one in an argument changes nothing of the command.
		if f := strings.Fields(st.parts[0].raw); len(f) == 0 || strings.Contains(f[0], "{{") {
			continue
		}
		text, ok := st.sampleText(ScopeBurst)
		if !ok {
			continue
		}
		args, _, serr := splitRedis(text)
		if serr != nil || len(args) == 0 || strings.HasPrefix(args[0], ":") {
			continue
		}
		cmds, steps = append(cmds, args), append(steps, st)
	}
	err := s.reads.Check(ctx, cmds)
	var we *redisdb.WriteError
	if errors.As(err, &we) {
		for i, args := range cmds {
			if strings.EqualFold(args[0], we.Command) {
				return &StatementError{Pos: steps[i].Pos, Text: steps[i].Text, Err: err, Schema: true}
			}
		}
		return &StatementError{Pos: sc.lastStatement().Pos, Text: sc.lastStatement().Text, Err: err, Schema: true}
	}
	return err
}

// rdReader is racetest's own connection as a check uses it.
type rdReader struct {
	*rdConn
	reads *redisdb.Reads
}

func (c rdReader) Exec(ctx context.Context, st Stmt) (Reply, error) {
	if err := c.reads.Check(ctx, [][]string{st.Args}); err != nil {
		return Reply{}, err
	}
	return c.rdConn.Exec(ctx, st)
}

// Snapshot reads the keys under the watched patterns (--effects auto).
func (s *rdStore) Snapshot(ctx context.Context, watch []string) (runner.Snapshot, error) {
	return s.snap.Snapshot(ctx, s.admin.cl, watch)
}

func (c *rdConn) Exec(ctx context.Context, st Stmt) (Reply, error) {
	args := make([]any, len(st.Args))
	for i, a := range st.Args {
		args[i] = a
	}
	v, err := c.cl.Do(ctx, args...).Result()
	if errors.Is(err, redis.Nil) {
		return Reply{Values: []string{""}}, nil
	}
	if err != nil {
		return Reply{}, err
	}
	return redisReply(v), nil
}

// redisReply reads a reply: its value, and as ROW_COUNT the integer of an
// integer reply (SADD's 1 or 0), 1 for any other value, or an array's length.
func redisReply(v any) Reply {
	switch x := v.(type) {
	case int64:
		return Reply{Values: []string{strconv.FormatInt(x, 10)}, Rows: x}
	case string:
		return Reply{Values: []string{x}, Rows: 1}
	case []any:
		r := Reply{Rows: int64(len(x)), Kind: ReplyArray}
		for _, e := range x {
			r.Values = append(r.Values, fmt.Sprint(e))
		}
		if len(r.Values) == 0 {
			r.Values = []string{""}
		}
		return r
	case map[any]any:
		// A RESP3 map (HGETALL): its fields, as an array of them.
		return Reply{Values: []string{fmt.Sprint(x)}, Rows: int64(len(x)), Kind: ReplyArray}
	case nil:
		return Reply{Values: []string{""}}
	}
	return Reply{Values: []string{fmt.Sprint(v)}, Rows: 1}
}

// Classify: an error reply is the command's own (unknown command, wrong
// type, a failing script), except those of a server that cannot serve
// now. Redis has no duplicate key and no deadlock.
func (c *rdConn) Classify(err error) (runner.Class, bool) {
	var re redis.Error
	if !errors.As(err, &re) {
		return runner.Error, false
	}
	msg := re.Error()
	for _, p := range []string{"LOADING", "BUSY", "OOM", "READONLY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN", "NOAUTH", "WRONGPASS", "NOPERM"} {
		if strings.HasPrefix(msg, p) {
			return runner.Error, false
		}
	}
	return runner.Error, true
}

// Rollback discards a MULTI the script left open.
func (c *rdConn) Rollback(ctx context.Context) error {
	err := c.cl.Do(ctx, "DISCARD").Err()
	if err != nil && strings.Contains(err.Error(), "without MULTI") {
		return nil
	}
	return err
}

func (c *rdConn) Close() error { return c.cl.Close() }

// redisDialect: scripts of redis-cli commands on Redis (or Valkey).
var redisDialect = dialect{backend: "redis", open: OpenRedis, lang: redisLanguage}

// redisLanguage is one command per line, its arguments split as redis-cli
// splits them.
var redisLanguage = &language{
	id:       Redis,
	name:     "redis",
	unit:     "commands",
	split:    (*parser).redis,
	tx:       redisTx,
	stmt:     redisStmt,
	gset:     redisGset,
	count:    redisCount,
	readOnly: func(words []string) bool { return redisReads[strings.Trim(words[0], `"'`)] },
}

// redis reads one command per line; a line starting with '#' is a comment.
func (p *parser) redis(src string) error {
	for n, raw := range strings.Split(src, "\n") {
		line := n + 1
		text := strings.TrimRight(raw, " \t\r")
		trimmed := strings.TrimLeft(text, " \t")
		col := len(text) - len(trimmed) + 1
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		if strings.HasPrefix(trimmed, `\`) {
			name, arg := splitMeta(trimmed)
			if name == `\gset` {
				return p.errf(line, col, `\gset must follow a command on its line: GET key \gset name`)
			}
			if err := p.meta(name, arg, line, col); err != nil {
				return err
			}
			continue
		}
		args, gset, err := splitRedis(trimmed)
		if err != nil {
			return p.errf(line, col+err.col, "%s", err.msg)
		}
		if len(args) == 0 {
			return p.errf(line, col, "empty command")
		}
		gsetName := ""
		if gset != "" {
			name, arg := splitMeta(gset)
			if name != `\gset` {
				return p.errf(line, col+strings.Index(trimmed, gset), `only \gset may follow a command on its line (got %s)`, name)
			}
			if !isIdent(arg) {
				return p.errf(line, col+strings.Index(trimmed, gset), `\gset needs a variable name: GET key \gset name`)
			}
			gsetName = arg
		}
		// The command is kept whole and split after its templates are
		// expanded, so that a template may span arguments ({{if}} … {{end}}).
		cmd := trimmed
		if gset != "" {
			cmd = strings.TrimRight(trimmed[:strings.LastIndex(trimmed, gset)], " \t")
		}
		if err := p.addStatement(cmd, []string{cmd}, line, col, gset != "", gsetName); err != nil {
			return err
		}
	}
	return nil
}

type splitErr struct {
	col int
	msg string
}

// splitRedis splits a command line into arguments: words, "double quoted"
// (with \n \t \" \\ escapes) and 'single quoted' (with \'), as redis-cli
// does; {{ … }} stays whole. A trailing \gset is returned apart.
func splitRedis(s string) (args []string, meta string, err *splitErr) {
	i := 0
	for {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
		if i >= len(s) {
			return args, "", nil
		}
		if s[i] == '\\' {
			return args, s[i:], nil
		}
		var b strings.Builder
		for i < len(s) && s[i] != ' ' && s[i] != '\t' {
			switch {
			case s[i] == '"' || s[i] == '\'':
				q, start := s[i], i
				i++
				for {
					if i >= len(s) {
						return nil, "", &splitErr{start, fmt.Sprintf("unterminated %c quote", q)}
					}
					if s[i] == q {
						i++
						break
					}
					if s[i] == '\\' && i+1 < len(s) {
						i++
						switch {
						case q == '\'' && s[i] != '\'':
							b.WriteByte('\\')
							b.WriteByte(s[i])
						case s[i] == 'n':
							b.WriteByte('\n')
						case s[i] == 't':
							b.WriteByte('\t')
						case s[i] == 'r':
							b.WriteByte('\r')
						default:
							b.WriteByte(s[i])
						}
						i++
						continue
					}
					b.WriteByte(s[i])
					i++
				}
			case strings.HasPrefix(s[i:], "{{"):
				end := strings.Index(s[i:], "}}")
				if end < 0 {
					return nil, "", &splitErr{i, "unterminated template: {{ without }}"}
				}
				b.WriteString(s[i : i+end+2])
				i += end + 2
			default:
				b.WriteByte(s[i])
				i++
			}
		}
		args = append(args, b.String())
	}
}

// redisArg replaces an argument that is exactly :name or :'name' by the
// variable's value. Only whole arguments: keys such as coupon:used hold
// colons of their own.
func (e *Exec) redisArg(a string) (string, error) {
	name := ""
	switch {
	case strings.HasPrefix(a, ":'") && strings.HasSuffix(a, "'") && isIdent(a[2:len(a)-1]):
		name = a[2 : len(a)-1]
	case strings.HasPrefix(a, ":") && isIdent(a[1:]):
		name = a[1:]
	default:
		return a, nil
	}
	v, ok := e.vars[name]
	if !ok {
		return "", fmt.Errorf("variable %s is not set — set it with \\gset %s on an earlier command", name, name)
	}
	return v, nil
}

// redisReads are the Redis commands that only read.
var redisReads = map[string]bool{
	"GET": true, "MGET": true, "EXISTS": true, "HGET": true, "HMGET": true, "HGETALL": true, "HEXISTS": true,
	"SISMEMBER": true, "SMEMBERS": true, "SCARD": true, "LLEN": true, "LRANGE": true, "LINDEX": true,
	"ZSCORE": true, "ZCARD": true, "ZRANGE": true, "STRLEN": true, "TYPE": true, "TTL": true, "PTTL": true,
}

// redisTx: MULTI opens a transaction, EXEC and DISCARD end it.
func redisTx(text string) Tx {
	first, _, _ := strings.Cut(text, " ")
	switch strings.ToUpper(first) {
	case "MULTI":
		return TxBegin
	case "EXEC", "DISCARD":
		return TxEnd
	}
	return TxNone
}

// redisStmt splits a command (its templates expanded) into arguments and
// puts in the variables an argument names.
func redisStmt(e *Exec, line string) (Stmt, error) {
	args, _, serr := splitRedis(line)
	if serr != nil {
		return Stmt{}, fmt.Errorf("once its templates are expanded, the command %q does not split into arguments: %s", line, serr.msg)
	}
	for i := range args {
		a, err := e.redisArg(args[i])
		if err != nil {
			return Stmt{}, err
		}
		args[i] = a
	}
	return Stmt{Args: args}, nil
}

// redisGset keeps the reply (an array's first element) as the variable
// named.
func redisGset(vars map[string]string, name string, r Reply) error {
	v := ""
	if len(r.Values) > 0 {
		v = r.Values[0]
	}
	vars[name] = v
	return nil
}

// redisCount: the reply's value; a key that does not exist holds nothing.
// An array is one value only when it holds one element (MGET of one key).
func redisCount(r Reply) (string, int, bool, error) {
	if r.Kind == ReplyArray && r.Rows != 1 {
		what := fmt.Sprintf("an array of %d elements", r.Rows)
		if r.Rows == 0 {
			what = "an empty array"
		}
		return "", 0, false, fmt.Errorf("returned %s — a check returns one value: count them (SCARD, LLEN, ZCARD, HLEN, EXISTS)", what)
	}
	v := firstValue(r)
	return v, 0, v == "", nil
}
