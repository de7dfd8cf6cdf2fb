package script

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/connstring"

	"github.com/racetest/racetest/internal/mongodb"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/mongostore"
)

// moStore runs scripts of database commands on MongoDB (or FerretDB):
// each document is sent with RunCommand on the URI's database.
type moStore struct {
	uri, db string
	dial    scenarios.DialFunc
	admin   *moConn
	server  mongodb.ServerInfo
}

// OpenMongo connects racetest's own client to p.Conn.Get(mongostore.Name).
func OpenMongo(ctx context.Context, p scenarios.Params) (Store, error) {
	uri := p.Conn.Get(mongostore.Name)
	if uri == "" {
		uri = mongodb.DefaultURI
	}
	cs, err := connstring.ParseAndValidate(uri)
	if err != nil {
		return nil, scenarios.BadParam(fmt.Errorf("mongo: invalid URI %s — check --mongo-uri or RACETEST_MONGO_URI", mongodb.Redact(uri)))
	}
	s := &moStore{uri: uri, db: cs.Database, dial: p.Dial}
	if s.db == "" {
		s.db = mongodb.DefaultDatabase
	}
	if s.admin, err = s.open(ctx); err != nil {
		return nil, err
	}
	if info, err := mongodb.BuildInfo(ctx, s.admin.db); err == nil {
		s.server = info
	}
	return s, nil
}

type dialFunc scenarios.DialFunc

func (d dialFunc) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return d(ctx, network, addr)
}

// open makes a client of one connection, polled rather than streamed so
// that its monitor holds no second connection, and pings it.
func (s *moStore) open(ctx context.Context) (*moConn, error) {
	o := options.Client().ApplyURI(s.uri).SetAppName("racetest").SetMaxPoolSize(1).SetMinPoolSize(1)
	if o.ServerSelectionTimeout == nil {
		o.SetServerSelectionTimeout(3 * time.Second)
	}
	if o.ConnectTimeout == nil {
		o.SetConnectTimeout(3 * time.Second)
	}
	if o.ServerMonitoringMode == nil {
		o.SetServerMonitoringMode(options.ServerMonitoringModePoll)
	}
	if s.dial != nil {
		o.SetDialer(dialFunc(s.dial))
	}
	cl, err := mongo.Connect(o)
	if err != nil {
		return nil, fmt.Errorf("mongo: cannot use %s — check --mongo-uri or RACETEST_MONGO_URI", mongodb.Redact(s.uri))
	}
	pctx, cancel := context.WithTimeout(ctx, 4*time.Second)
	defer cancel()
	if err := cl.Ping(pctx, readpref.Primary()); err != nil {
		_ = cl.Disconnect(context.Background())
		return nil, fmt.Errorf("mongo: cannot connect to %s — is the server running? set --mongo-uri or RACETEST_MONGO_URI", mongodb.Redact(s.uri))
	}
	return &moConn{cl: cl, db: cl.Database(s.db)}, nil
}

func (s *moStore) Server() string { return s.server.String() }
func (s *moStore) Where() string {
	return fmt.Sprintf("%s at %s, database %s", s.Server(), mongodb.Redact(s.uri), s.db)
}
func (s *moStore) Admin() Conn { return s.admin }
func (s *moStore) Notes() []string {
	if s.server.FerretDB() {
		return []string{"mongo: FerretDB runs findAndModify and updates (conditional ones, $inc) as a read and a replace, not atomically: a RACE or LOST there may be FerretDB's, not your pattern's"}
	}
	return nil
}
func (s *moStore) Close() error { return s.admin.Close() }

func (s *moStore) Open(context.Context, int) (Pool, error) { return moPool{s}, nil }

type moPool struct{ s *moStore }

// Session gives the worker a client of its own, so that a wire release
// knows whose connection each request goes on.
func (p moPool) Session(ctx context.Context, _ int) (SessionConn, error) { return p.s.open(ctx) }
func (moPool) Close() error                                              { return nil }

// Snapshot reads the watched collections (--effects auto).
func (s *moStore) Snapshot(ctx context.Context, watch []string) (runner.Snapshot, error) {
	return mongostore.Snapshot(ctx, s.admin.db, watch)
}

type moConn struct {
	cl *mongo.Client
	db *mongo.Database
}

// writeError is a write the server refused inside an ok reply
// (writeErrors): a duplicate key, say.
type writeError struct {
	Code int
	Msg  string
}

func (e *writeError) Error() string { return fmt.Sprintf("write error %d: %s", e.Code, e.Msg) }

func (c *moConn) Exec(ctx context.Context, st Stmt) (r Reply, err error) {
	var cmd bson.D
	if err := bson.UnmarshalExtJSON([]byte(st.Text), false, &cmd); err != nil {
		return Reply{}, &badCommand{err}
	}
	raw, err := c.db.RunCommand(ctx, cmd).Raw()
	if err != nil {
		return Reply{}, err
	}
	if len(cmd) > 0 {
		defer func() { r.Command = cmd[0].Key }()
	}
	if we, ok := raw.Lookup("writeErrors").ArrayOK(); ok {
		if vals, err := we.Values(); err == nil && len(vals) > 0 {
			if d, ok := vals[0].DocumentOK(); ok {
				code, _ := d.Lookup("code").AsInt64OK()
				msg, _ := d.Lookup("errmsg").StringValueOK()
				return Reply{}, &writeError{Code: int(code), Msg: msg}
			}
		}
	}
	return mongoReply(raw), nil
}

// badCommand is a document that stopped being JSON once its variables were
// put in.
type badCommand struct{ err error }

func (e *badCommand) Error() string { return "not a JSON document: " + e.err.Error() }

// mongoReply flattens a reply for \gset: nested fields joined by '_'
// (value_status, lastErrorObject_n). A find's reply is its first document,
// as a query's row is in SQL. ROW_COUNT is the reply's n (insert, update,
// delete, count), lastErrorObject.n (findAndModify), or the documents a
// find returned.
func mongoReply(raw bson.Raw) Reply {
	r := Reply{Rows: 1}
	if batch, ok := raw.Lookup("cursor", "firstBatch").ArrayOK(); ok {
		vals, _ := batch.Values()
		r.Rows, r.Kind = int64(len(vals)), ReplyDocuments
		if id, ok := raw.Lookup("cursor", "id").AsInt64OK(); ok && id != 0 {
			r.More = true
		}
		if len(vals) > 0 {
			if d, ok := vals[0].DocumentOK(); ok {
				flatten(&r, "", d)
			}
		}
		return r
	}
	flatten(&r, "", raw)
	if n, ok := raw.Lookup("n").AsInt64OK(); ok {
		r.Rows, r.Kind = n, ReplyCount
	} else if n, ok := raw.Lookup("lastErrorObject", "n").AsInt64OK(); ok {
		r.Rows = n
	}
	return r
}

func flatten(r *Reply, prefix string, d bson.Raw) {
	elems, _ := d.Elements()
	for _, e := range elems {
		key := prefix + e.Key()
		v := e.Value()
		if sub, ok := v.DocumentOK(); ok {
			flatten(r, key+"_", sub)
			continue
		}
		r.Columns = append(r.Columns, key)
		r.Values = append(r.Values, bsonText(v))
	}
}

func bsonText(v bson.RawValue) string {
	switch v.Type {
	case bson.TypeString:
		return v.StringValue()
	case bson.TypeNull, bson.TypeUndefined:
		return ""
	case bson.TypeBoolean:
		return strconv.FormatBool(v.Boolean())
	case bson.TypeInt32, bson.TypeInt64:
		n, _ := v.AsInt64OK()
		return strconv.FormatInt(n, 10)
	case bson.TypeDouble:
		return strconv.FormatFloat(v.Double(), 'g', -1, 64)
	}
	return strings.Trim(v.String(), `"`)
}

// Classify: E11000 is a refusal; WriteConflict (112) and a transient
// transaction error ask for a retry; any other error the server sent is
// the command's own, save those of a server that cannot serve now.
func (c *moConn) Classify(err error) (runner.Class, bool) {
	var we *writeError
	if errors.As(err, &we) {
		if we.Code == 11000 {
			return runner.Declined, false
		}
		return runner.Error, true
	}
	if mongo.IsDuplicateKeyError(err) {
		return runner.Declined, false
	}
	var bc *badCommand
	if errors.As(err, &bc) {
		return runner.Error, true
	}
	var ce mongo.CommandError
	if errors.As(err, &ce) {
		if ce.Code == 112 || ce.HasErrorLabel("TransientTransactionError") {
			return runner.Conflict, false
		}
		return runner.Error, !ce.HasErrorLabel("NetworkError") && !ce.HasErrorLabel("RetryableWriteError")
	}
	return runner.Error, false
}

func (c *moConn) Rollback(context.Context) error { return nil }

// Reader is racetest's own connection: a check's commands are judged by
// their text (mongodb.CheckRead) before each is sent.
func (s *moStore) Reader(context.Context) (Conn, func(), error) { return s.admin, func() {}, nil }

// mongoCount reads a check's reply as one number or boolean: a count's n;
// the documents a find returned (all in its first batch); the one field
// (but _id) of the one document an aggregate returned ({"$count": "n"}),
// none counting 0.
func mongoCount(r Reply) (string, int, bool, error) {
	if r.Kind == ReplyCount {
		return "", int(r.Rows), true, nil
	}
	if r.Kind != ReplyDocuments {
		return "", 0, false, fmt.Errorf("returned no count (%s) — a check is a count ({\"count\": …}), a find (its documents are counted) or an aggregate that ends with one value ({\"$count\": \"n\"})", strings.Join(r.Columns, ", "))
	}
	if r.More {
		return "", 0, false, fmt.Errorf("returned more documents than its first batch holds — count them with {\"count\": …}")
	}
	if strings.EqualFold(r.Command, "find") {
		return "", int(r.Rows), true, nil
	}
	if r.Rows == 0 {
		return "", 0, true, nil
	}
	if r.Rows > 1 {
		return "", 0, false, fmt.Errorf("returned %d documents — a check returns one value: end the pipeline with {\"$count\": \"n\"}", r.Rows)
	}
	var fields []int
	for i, c := range r.Columns {
		if c != "_id" && !strings.HasPrefix(c, "_id_") {
			fields = append(fields, i)
		}
	}
	if len(fields) != 1 {
		return "", 0, false, fmt.Errorf("returned a document of %d fields (%s) — a check returns one value: one field besides _id", len(fields), strings.Join(r.Columns, ", "))
	}
	return strings.TrimSpace(r.Values[fields[0]]), 0, false, nil
}

func (c *moConn) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return c.cl.Disconnect(ctx)
}

// mongoDialect: scripts of database commands on MongoDB (or FerretDB).
var mongoDialect = dialect{backend: "mongo", open: OpenMongo, lang: mongoLanguage}

// mongoLanguage is database commands written as JSON documents.
var mongoLanguage = &language{
	id:    Mongo,
	name:  "mongo",
	unit:  "commands",
	split: (*parser).mongo,
	tx:    func(string) Tx { return TxNone }, // each command stands alone: no transaction spans two
	stmt: func(e *Exec, text string) (Stmt, error) {
		text, err := e.mongoVars(text)
		return Stmt{Text: text}, err
	},
	gset: func(vars map[string]string, prefix string, r Reply) error {
		for i, c := range r.Columns {
			vars[prefix+c] = r.Values[i]
		}
		return nil
	},
	count:  mongoCount,
	refuse: mongodb.CheckReadJSON,
	// Reads are not told apart from writes: every command is a step of its own.
	readOnly: func([]string) bool { return false },
}
