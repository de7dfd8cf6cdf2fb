package mongostore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"syscall"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/connstring"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/topology"

	"github.com/racetest/racetest/internal/mongodb"
	"github.com/racetest/racetest/scenarios"
)

// Name is the backend's name.
const Name = "mongo"

// VariantOneActive is unique-insert's "one active per user" variant: a unique
// index with partialFilterExpression {active: true}.
const VariantOneActive = "one-active"

// connectTimeout bounds server selection and the TCP/TLS handshake, so that
// an absent server is reported within seconds, not after the driver's 30 s.
const connectTimeout = 3 * time.Second

// controlTimeout bounds racetest's own calls outside the attempts (Prepare,
// Reset, Effects), so that a server that dies mid-run stops the run instead
// of hanging it.
const controlTimeout = 10 * time.Second

// disconnectTimeout bounds closing a client (see disconnect).
const disconnectTimeout = time.Second

// Register adds the MongoDB backend and its scenarios to r.
func Register(r *scenarios.Registry) {
	r.AddBackend(Backend)
	for _, k := range kinds() {
		r.Register(k.name, Name, factory(k))
		r.SetVariants(k.name, Name, variantsOf(k.name))
	}
}

// Backend is the MongoDB backend as the registry knows it: its connection
// and the knobs it accepts.
var Backend = scenarios.Backend{
	Name:    Name,
	Summary: "MongoDB (mongo-driver v2); --mongo-uri or RACETEST_MONGO_URI, default " + mongodb.DefaultURI,
	Server:  true,
	Conn: &scenarios.Connection{
		Flag: "mongo-uri", Env: "RACETEST_MONGO_URI", Default: mongodb.DefaultURI, What: "MongoDB URI", Redact: mongodb.Redact,
		Key: Name,
	},
	Releases: []string{"last-byte"},
	Kept:     "collections",
	Janitor:  Janitor,
}

// variantsOf lists the variants scenario accepts here besides "".
func variantsOf(scenario string) []string {
	if scenario == scenarios.UniqueInsert {
		return []string{VariantOneActive}
	}
	return nil
}

// password returns the URI's password, so that errors can be scrubbed of it
// even where a driver message quotes it.
func password(uri string) string {
	cs, err := connstring.Parse(uri)
	if err != nil || !cs.PasswordSet {
		return ""
	}
	return cs.Password
}

// secretError hides a password that an underlying message might quote,
// while keeping the chain for errors.Is and errors.As.
type secretError struct {
	err    error
	secret string
}

func (e *secretError) Error() string {
	msg := e.err.Error()
	if e.secret != "" {
		msg = strings.ReplaceAll(msg, e.secret, "xxxxx")
		if esc := url.QueryEscape(e.secret); esc != e.secret {
			msg = strings.ReplaceAll(msg, esc, "xxxxx")
		}
	}
	return msg
}

func (e *secretError) Unwrap() error { return e.err }

func scrub(err error, uri string) error {
	if err == nil {
		return nil
	}
	return &secretError{err: err, secret: password(uri)}
}

// dialer adapts scenarios.DialFunc to the driver's dialer hook.
type dialer scenarios.DialFunc

func (d dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return d(ctx, network, addr)
}

// conn is where a run's collections live, as the URI says.
type conn struct {
	uri      string // as given, with its password: never printed
	database string
	dial     scenarios.DialFunc
}

func newConn(p scenarios.Params) (conn, error) {
	uri := p.Conn.Get(Name)
	if uri == "" {
		uri = mongodb.DefaultURI
	}
	cs, err := connstring.ParseAndValidate(uri)
	if err != nil {
		return conn{}, scenarios.BadParam(fmt.Errorf("mongo: invalid URI %s: %w — check --mongo-uri or RACETEST_MONGO_URI", mongodb.Redact(uri), scrub(err, uri)))
	}
	db := cs.Database
	if db == "" {
		db = mongodb.DefaultDatabase
	}
	return conn{uri: uri, database: db, dial: p.Dial}, nil
}

// options returns client options for a pool of size connections. Every
// connection the client makes (the pool's and the monitor's) goes through
// the run's Dial hook when one is set.
func (c conn) options(size int) *options.ClientOptions {
	o := options.Client().ApplyURI(c.uri).SetAppName("racetest")
	// A timeout the user put in the URI wins over ours.
	if o.ServerSelectionTimeout == nil {
		o.SetServerSelectionTimeout(connectTimeout)
	}
	if o.ConnectTimeout == nil {
		o.SetConnectTimeout(connectTimeout)
	}
	if size > 0 {
		n := uint64(size)
		// MaxConnecting = size lets the warm-up open every connection at once
		// instead of the driver's default two at a time.
		o.SetMaxPoolSize(n).SetMinPoolSize(n).SetMaxConnecting(n)
	}
	if c.dial != nil {
		o.SetDialer(dialer(c.dial))
	}
	return o
}

// ownConnections reports whether each worker opens a client of its own:
// when the run dials through a hook (a wire release), which must know whose
// connection a request goes on.
func (c conn) ownConnections() bool { return c.dial != nil }

// workerOptions are one worker's client: one connection, kept open. The
// server is polled rather than streamed (unless the URI says otherwise), so
// that the client's monitoring holds one connection, not two: the driver
// streams heartbeats on one and measures round trips on another. A
// monitor's connection only ever sends hello, which the wire release never
// takes for a worker's (see release's anonymous writes).
func (c conn) workerOptions() *options.ClientOptions {
	o := c.options(1)
	if o.ServerMonitoringMode == nil {
		o.SetServerMonitoringMode(options.ServerMonitoringModePoll)
	}
	return o
}

// connect makes a client and pings the server, failing within a few seconds
// with one clear, redacted line when the server cannot be reached.
func (c conn) connect(ctx context.Context, o *options.ClientOptions) (*mongo.Client, error) {
	client, err := mongo.Connect(o)
	if err != nil {
		return nil, fmt.Errorf("mongo: cannot use %s: %w — check --mongo-uri or RACETEST_MONGO_URI", mongodb.Redact(c.uri), scrub(err, c.uri))
	}
	pctx, cancel := context.WithTimeout(ctx, connectTimeout+time.Second)
	defer cancel()
	if err := client.Ping(pctx, readpref.Primary()); err != nil {
		_ = disconnect(client)
		return nil, c.connectError(err)
	}
	return client, nil
}

// connectError names the host and the reason in one line.
func (c conn) connectError(err error) error {
	return c.unreachableError("mongo: cannot connect to", err)
}

// unreachableError is lead, the hosts, the reason, and what to check.
func (c conn) unreachableError(lead string, err error) error {
	hosts := "the server"
	if cs, perr := connstring.Parse(c.uri); perr == nil && len(cs.Hosts) > 0 {
		hosts = strings.Join(cs.Hosts, ",")
	}
	why := "no answer within " + connectTimeout.String()
	var sse topology.ServerSelectionError
	if errors.As(err, &sse) {
		for _, s := range sse.Desc.Servers {
			if s.LastError != nil {
				why = reason(s.LastError)
				break
			}
		}
	} else {
		why = reason(err)
	}
	var ce mongo.CommandError
	if errors.As(err, &ce) && (ce.Code == 18 || ce.HasErrorLabel("AuthenticationFailed")) ||
		strings.Contains(err.Error(), "auth error") {
		return fmt.Errorf("mongo: authentication to %s failed (%s) — check the user and password in --mongo-uri or RACETEST_MONGO_URI (%s): %w",
			hosts, why, mongodb.Redact(c.uri), scrub(err, c.uri))
	}
	msg := fmt.Sprintf("%s %s (%s) — is the server running? set --mongo-uri or RACETEST_MONGO_URI (using %s)", lead, hosts, why, mongodb.Redact(c.uri))
	if errors.As(err, &sse) {
		// The driver's text is its whole topology ("current topology: {
		// Type: Unknown, Servers: [{ Addr: …") and says no more than the
		// cause above: keep it for errors.As, not for the reader.
		return &selectionError{msg: msg, err: err}
	}
	return fmt.Errorf("%s: %w", msg, scrub(err, c.uri))
}

// selectionError is a failed server selection, said in one line; the
// driver's error stays behind it for errors.As.
type selectionError struct {
	msg string
	err error
}

func (e *selectionError) Error() string { return e.msg }
func (e *selectionError) Unwrap() error { return e.err }

// reason is the innermost cause a person recognises: "connection refused",
// "no such host", "i/o timeout".
func reason(err error) string {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return "no such host " + dnsErr.Name
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timed out"
	}
	msg := err.Error()
	if i := strings.LastIndex(msg, ": "); i >= 0 && i+2 < len(msg) {
		msg = msg[i+2:]
	}
	return msg
}

// Probe connects with p's connection settings and reports which server
// answers. Tests use it to state their expectations per server.
func Probe(ctx context.Context, p scenarios.Params) (mongodb.ServerInfo, error) {
	c, err := newConn(p)
	if err != nil {
		return mongodb.ServerInfo{}, err
	}
	client, err := c.connect(ctx, c.options(1))
	if err != nil {
		return mongodb.ServerInfo{}, err
	}
	defer disconnect(client)
	return mongodb.BuildInfo(ctx, client.Database(c.database))
}
