package httpfire

import (
	"context"
	"crypto/tls"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/template"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/racetest/racetest/internal/mongodb"
	"github.com/racetest/racetest/internal/redisdb"
	"github.com/racetest/racetest/internal/sqldb"
	"github.com/racetest/racetest/scenarios/mongostore"
	"github.com/racetest/racetest/scenarios/mysqlstore"
	"github.com/redis/go-redis/v9"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// effectsCheck counts, after a burst, how many times the guarded action
// really took effect for the burst's subject (or, as an invariant, how
// many times the invariant is broken).
type effectsCheck interface {
	open(ctx context.Context) error
	// value is what the store answered: a number, a boolean, a text.
	value(ctx context.Context, v Vars) (any, error)
	describe() string
	close() error
}

// count reads c's answer as a count.
func count(ctx context.Context, c effectsCheck, v Vars) (int, error) {
	x, err := c.value(ctx, v)
	if err != nil {
		return 0, err
	}
	return number(x)
}

// violations reads c's answer as an invariant's: a count of what breaks
// it, or a boolean that must hold (true: 0 violations; false: 1).
func violations(ctx context.Context, c effectsCheck, v Vars) (int, error) {
	x, err := c.value(ctx, v)
	if err != nil {
		return 0, err
	}
	if s, ok := x.(string); ok {
		switch strings.ToLower(strings.TrimSpace(s)) {
		case "t", "true":
			x = true
		case "f", "false":
			x = false
		}
	}
	if b, ok := x.(bool); ok {
		if b {
			return 0, nil
		}
		return 1, nil
	}
	return number(x)
}

// The effects checks default to the scenario backends' servers.
const (
	defaultPostgresURL = sqldb.DefaultPostgresURL
	defaultMongoURI    = mongodb.DefaultURI
)

const effectsKinds = "sql:mysql:QUERY, sql:postgres:QUERY, redis:COMMAND, mongo:DB.COLLECTION:FILTER or http:URL"

func parseEffects(spec string, t *Target) (effectsCheck, error) {
	return parseCheck("effects", spec, t)
}

// parseCheck reads an effects check or an invariant (field names it).
func parseCheck(field, spec string, t *Target) (effectsCheck, error) {
	kind, rest, _ := strings.Cut(spec, ":")
	bad := func(format string, a ...any) error {
		return inputErrorf(field, "%q: %s (want %s)", spec, fmt.Sprintf(format, a...), effectsKinds)
	}
	tmpl := func(text string) (*template.Template, error) {
		tt, err := parseTemplate(field, text)
		if err != nil {
			return nil, err
		}
		_, err = execute(tt, Vars{RunID: "sample", Key: "racetest_sample_0", Token: "0000000000000000"})
		return tt, err
	}
	conn := t.p.Conn
	switch kind {
	case "sql":
		driver, query, _ := strings.Cut(rest, ":")
		if strings.TrimSpace(query) == "" {
			return nil, bad("no query")
		}
		q, err := tmpl(query)
		if err != nil {
			return nil, err
		}
		// Refused before anything connects; a query that passes runs in
		// a read-only transaction (readOnly).
		if sample, err := execute(q, Vars{RunID: "sample", Key: "racetest_sample_0", Token: "0000000000000000"}); err == nil {
			if err := sqldb.CheckQuery(sample); err != nil {
				return nil, &InputError{Field: field, Err: err}
			}
		}
		switch driver {
		case "mysql", "mariadb":
			cfg, err := sqldb.MySQLConfig(conn.Get(mysqlstore.Name))
			if err != nil {
				return nil, &InputError{Field: "mysql-dsn", Err: err}
			}
			return &mysqlCheck{cfg: cfg, query: q, spec: "sql:mysql", field: field}, nil
		case "postgres", "postgresql", "pg":
			cfg, err := pgConfig(conn)
			if err != nil {
				return nil, err
			}
			return &pgCheck{cfg: cfg, query: q, field: field}, nil
		}
		return nil, bad("unknown SQL server %q", driver)
	case "redis":
		if strings.TrimSpace(rest) == "" {
			return nil, bad("no command")
		}
		c, err := tmpl(rest)
		if err != nil {
			return nil, err
		}
		opt, err := redisOptions(conn, effectsOnRedis)
		if err != nil {
			return nil, err
		}
		return &redisCheck{opt: opt, cmd: c, field: field}, nil
	case "mongo", "mongodb":
		ns, filter, _ := strings.Cut(rest, ":")
		db, coll, ok := strings.Cut(ns, ".")
		if !ok || db == "" || coll == "" {
			return nil, bad("name the collection as DB.COLLECTION")
		}
		if strings.TrimSpace(filter) == "" {
			filter = "{}"
		}
		f, err := tmpl(filter)
		if err != nil {
			return nil, err
		}
		var probe bson.D
		sample, _ := execute(f, Vars{RunID: "sample", Key: "racetest_sample_0", Token: "0000000000000000"})
		if err := bson.UnmarshalExtJSON([]byte(sample), false, &probe); err != nil {
			return nil, bad("the filter is not JSON: %v", err)
		}
		uri := conn.Get(mongostore.Name)
		if uri == "" {
			uri = defaultMongoURI
		}
		return &mongoCheck{uri: uri, db: db, coll: coll, filter: f}, nil
	case "http", "https":
		text := rest
		if strings.HasPrefix(rest, "//") {
			// A bare URL: http://host/count works as well as http:http://host/count.
			text = spec
		}
		u, err := tmpl(text)
		if err != nil {
			return nil, err
		}
		sample, _ := execute(u, Vars{RunID: "sample", Key: "racetest_sample_0", Token: "0000000000000000"})
		if _, err := parseTarget(field, sample); err != nil {
			return nil, err
		}
		return &httpCheck{t: t, url: u}, nil
	}
	return nil, bad("unknown kind %q", kind)
}

func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// number reads a count from what a store returned.
func number(v any) (int, error) {
	switch x := v.(type) {
	case nil:
		return 0, nil
	case int64:
		return int(x), nil
	case int:
		return x, nil
	case int32:
		return int(x), nil
	case float64:
		if x != math.Trunc(x) || x < 0 || math.IsInf(x, 0) {
			return 0, fmt.Errorf("%v is not a count", x)
		}
		return int(x), nil
	case []byte:
		return number(string(x))
	case string:
		s := strings.TrimSpace(x)
		if n, err := strconv.Atoi(s); err == nil {
			return n, nil
		}
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			return number(f)
		}
		return 0, fmt.Errorf("%q is not a number", truncate(s, 60))
	case []any:
		return len(x), nil
	case bool:
		if x {
			return 1, nil
		}
		return 0, nil
	}
	return 0, fmt.Errorf("a %T is not a count", v)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

type mysqlCheck struct {
	cfg   *mysql.Config
	query *template.Template
	spec  string
	field string // effects, invariant
	db    *sql.DB
}

func (c *mysqlCheck) describe() string { return c.spec + " on " + c.cfg.Addr + "/" + c.cfg.DBName }

func (c *mysqlCheck) open(ctx context.Context) error {
	db, err := openMySQL(ctx, c.cfg)
	c.db = db
	return err
}

// value runs the query in a read-only transaction, rolled back.
func (c *mysqlCheck) value(ctx context.Context, v Vars) (any, error) {
	q, err := execute(c.query, v)
	if err != nil {
		return nil, err
	}
	if err := sqldb.CheckQuery(q); err != nil {
		return nil, &InputError{Field: c.field, Err: err}
	}
	conn, err := c.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, sqldb.MySQL.BeginReadOnly()); err != nil {
		return nil, err
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sqldb.CloseTimeout)
		defer cancel()
		_, _ = conn.ExecContext(rctx, "ROLLBACK")
	}()
	rows, err := conn.QueryContext(ctx, q)
	if err != nil {
		return nil, c.refused(err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	n := 0
	var first any
	for rows.Next() {
		if n++; n > 1 {
			continue
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		first = vals[0]
	}
	if err := rows.Err(); err != nil {
		return nil, c.refused(err)
	}
	if err := sqldb.OneValue(n, len(cols)); err != nil {
		return nil, &InputError{Field: c.field, Err: fmt.Errorf("%s %w", c.spec, err)}
	}
	return first, nil
}

// refused names a write the read-only transaction refused.
func (c *mysqlCheck) refused(err error) error {
	if sqldb.IsReadOnlyRefusal(err) {
		return &InputError{Field: c.field, Err: &sqldb.WriteError{Err: err}}
	}
	return err
}

func (c *mysqlCheck) close() error {
	if c.db != nil {
		return c.db.Close()
	}
	return nil
}

type pgCheck struct {
	cfg   *pgx.ConnConfig
	query *template.Template
	field string // effects, invariant
	conn  *pgx.Conn
}

func (c *pgCheck) describe() string {
	return fmt.Sprintf("sql:postgres on %s:%d/%s", c.cfg.Host, c.cfg.Port, c.cfg.Database)
}

func (c *pgCheck) open(ctx context.Context) error {
	conn, err := pgx.ConnectConfig(ctx, c.cfg)
	if err != nil {
		return fmt.Errorf("cannot connect to PostgreSQL at %s:%d: %w — is it running? set --postgres-url or RACETEST_POSTGRES_URL", c.cfg.Host, c.cfg.Port, err)
	}
	c.conn = conn
	return nil
}

// value runs the query in a read-only transaction, rolled back, over the
// extended protocol: one statement, which cannot end the transaction and
// write after it (SELECT 1; COMMIT; DELETE …). Values come back as text.
func (c *pgCheck) value(ctx context.Context, v Vars) (any, error) {
	q, err := execute(c.query, v)
	if err != nil {
		return nil, err
	}
	if err := sqldb.CheckQuery(q); err != nil {
		return nil, &InputError{Field: c.field, Err: err}
	}
	pc := c.conn.PgConn()
	if _, err := pc.Exec(ctx, sqldb.Postgres.BeginReadOnly()).ReadAll(); err != nil {
		return nil, err
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sqldb.CloseTimeout)
		defer cancel()
		_, _ = pc.Exec(rctx, "ROLLBACK").ReadAll()
	}()
	res := pc.ExecParams(ctx, strings.TrimRight(q, " \t\r\n;"), nil, nil, nil, nil).Read()
	if res.Err != nil {
		if sqldb.IsReadOnlyRefusal(res.Err) {
			return nil, &InputError{Field: c.field, Err: &sqldb.WriteError{Err: res.Err}}
		}
		return nil, res.Err
	}
	if err := sqldb.OneValue(len(res.Rows), len(res.FieldDescriptions)); err != nil {
		return nil, &InputError{Field: c.field, Err: fmt.Errorf("sql:postgres %w", err)}
	}
	if x := res.Rows[0][0]; x != nil {
		return string(x), nil
	}
	return nil, nil // NULL: nothing counted
}

func (c *pgCheck) close() error {
	if c.conn != nil {
		return c.conn.Close(context.Background())
	}
	return nil
}

// effectsOnRedis names, in the refusal of a Redis Cluster, what refuses it.
const effectsOnRedis = "the effects check redis:CMD (racetest http --effects)"

type redisCheck struct {
	opt    *redis.Options
	cmd    *template.Template
	field  string // effects, invariant
	client *redis.Client
	reads  *redisdb.Reads
}

func (c *redisCheck) describe() string { return "redis on " + c.opt.Addr }

func (c *redisCheck) open(ctx context.Context) error {
	client, err := openRedis(ctx, c.opt, effectsOnRedis)
	if err != nil {
		return err
	}
	c.client = client
	// The command is judged now, before anything runs, by the server's
	// COMMAND INFO (with sample values if a template names it; judged
	// again as each burst sends it).
	c.reads = redisdb.NewReads(c.client)
	if sample, err := execute(c.cmd, Vars{RunID: "sample", Key: "racetest_sample_0", Token: "0000000000000000"}); err == nil {
		return c.judge(ctx, sample)
	}
	return nil
}

// judge refuses cmd unless the server flags it read-only.
func (c *redisCheck) judge(ctx context.Context, cmd string) error {
	err := c.reads.Check(ctx, [][]string{strings.Fields(cmd)})
	var we *redisdb.WriteError
	if errors.As(err, &we) {
		return &InputError{Field: c.field, Err: err}
	}
	return err
}

func (c *redisCheck) value(ctx context.Context, v Vars) (any, error) {
	cmd, err := execute(c.cmd, v)
	if err != nil {
		return nil, err
	}
	if err := c.judge(ctx, cmd); err != nil {
		return nil, err
	}
	fields := strings.Fields(cmd)
	args := make([]any, len(fields))
	for i, f := range fields {
		args[i] = f
	}
	res, err := c.client.Do(ctx, args...).Result()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if n, many := replyLen(res); many && n != 1 {
		return nil, &InputError{Field: c.field, Err: fmt.Errorf("redis:%s returned an array of %d elements — a check returns one value: count them (SCARD, LLEN, ZCARD, HLEN, EXISTS)", cmd, n)}
	}
	if a, ok := res.([]any); ok && len(a) == 1 {
		res = a[0]
	}
	return res, err
}

// replyLen is an array's or a map's length; many reports either.
func replyLen(v any) (n int, many bool) {
	switch x := v.(type) {
	case []any:
		return len(x), true
	case map[any]any:
		return len(x), true
	}
	return 0, false
}

func (c *redisCheck) close() error {
	if c.client != nil {
		return c.client.Close()
	}
	return nil
}

type mongoCheck struct {
	uri, db, coll string
	filter        *template.Template
	client        *mongo.Client
}

func (c *mongoCheck) describe() string { return "mongo count in " + c.db + "." + c.coll }

func (c *mongoCheck) open(ctx context.Context) error {
	client, err := mongo.Connect(options.Client().ApplyURI(c.uri))
	if err != nil {
		return fmt.Errorf("cannot parse the MongoDB URI (%s): %v", redactURL(c.uri), strings.ReplaceAll(err.Error(), c.uri, redactURL(c.uri)))
	}
	c.client = client
	if err := client.Ping(ctx, nil); err != nil {
		return fmt.Errorf("cannot connect to MongoDB at %s: %v — is it running? set --mongo-uri or RACETEST_MONGO_URI", redactURL(c.uri), strings.ReplaceAll(err.Error(), c.uri, redactURL(c.uri)))
	}
	return nil
}

func (c *mongoCheck) value(ctx context.Context, v Vars) (any, error) {
	f, err := execute(c.filter, v)
	if err != nil {
		return nil, err
	}
	var filter bson.D
	if err := bson.UnmarshalExtJSON([]byte(f), false, &filter); err != nil {
		return nil, fmt.Errorf("the filter is not JSON: %w", err)
	}
	return c.client.Database(c.db).Collection(c.coll).CountDocuments(ctx, filter)
}

func (c *mongoCheck) close() error {
	if c.client != nil {
		return c.client.Disconnect(context.Background())
	}
	return nil
}

// httpCheck GETs a URL whose body is the count: a plain number, or a JSON
// object with one numeric field ({"count": 2}).
type httpCheck struct {
	t   *Target
	url *template.Template
}

func (c *httpCheck) describe() string { return "http GET " + c.url.Root.String() }

func (c *httpCheck) open(context.Context) error { return nil }

func (c *httpCheck) value(ctx context.Context, v Vars) (any, error) {
	raw, err := execute(c.url, v)
	if err != nil {
		return nil, err
	}
	body, err := c.t.aside(ctx, "GET", raw, v)
	if err != nil {
		return nil, err
	}
	if b := strings.TrimSpace(string(body)); b == "true" || b == "false" {
		return b == "true", nil // an invariant's answer
	}
	n, err := countFromBody(body)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", redactURL(raw), err)
	}
	return n, nil
}

func (c *httpCheck) close() error { return nil }

// aside makes a request beside the bursts (a setup, an effects check) with
// an ordinary client and, on the target's own host or one named in
// CredentialsTo, the burst's credentials — its Authorization header and
// cookies, nothing else — and returns the body of a 2xx answer.
func (t *Target) aside(ctx context.Context, method, raw string, v Vars) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, raw, nil)
	if err != nil {
		return nil, err
	}
	escapeQuery(req.URL)
	req.Header.Set("User-Agent", userAgent)
	if !t.credentialsGo(req.URL) {
		return t.do(req, method, raw)
	}
	for _, h := range t.c.headers {
		if strings.EqualFold(h.name, "Authorization") {
			val, err := execute(h.value, v)
			if err != nil {
				return nil, err
			}
			req.Header.Set("Authorization", val)
		}
	}
	if t.c.cookie != "" {
		req.Header.Set("Cookie", t.c.cookie)
	}
	return t.do(req, method, raw)
}

// credentialsGo reports whether the burst's credentials may go to u: the
// target's own scheme and host, or a host the user named.
func (t *Target) credentialsGo(u *url.URL) bool {
	if strings.EqualFold(u.Host, t.c.host) && u.Scheme == t.c.scheme {
		return true
	}
	for _, h := range t.c.cfg.CredentialsTo {
		if strings.EqualFold(h, u.Host) || strings.EqualFold(h, u.Hostname()) {
			return true
		}
	}
	return false
}

func (t *Target) do(req *http.Request, method, raw string) ([]byte, error) {
	// A server with one worker would wait on this connection, idle in the
	// client's pool, and answer none of the burst's requests.
	req.Close = t.probe.Serial()
	resp, err := t.asideClient().Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, redactURL(raw), errUnwrapURL(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("%s %s: HTTP %d %s", method, redactURL(raw), resp.StatusCode, truncate(strings.TrimSpace(string(body)), 80))
	}
	return body, nil
}

func (t *Target) asideClient() *http.Client {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.client == nil {
		t.client = &http.Client{
			Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: t.c.cfg.Insecure}}, //nolint:gosec // asked for
			Timeout:   t.c.timeout,
			// A setup or effects endpoint that redirects is answered as is.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	return t.client
}

func countFromBody(body []byte) (int, error) {
	s := strings.TrimSpace(string(body))
	if n, err := number(s); err == nil {
		return n, nil
	}
	var obj map[string]any
	if json.Unmarshal([]byte(s), &obj) == nil {
		var found []any
		for _, v := range obj {
			if _, ok := v.(float64); ok {
				found = append(found, v)
			}
		}
		if len(found) == 1 {
			return number(found[0])
		}
	}
	return 0, fmt.Errorf("the body %q is neither a number nor a JSON object with one numeric field", truncate(s, 60))
}
