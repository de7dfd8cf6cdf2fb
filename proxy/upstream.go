package proxy

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/racetest/racetest/internal/sqldb"
)

// Protocol is a wire protocol the proxy speaks.
type Protocol string

const (
	Postgres Protocol = "postgres"
	MySQL    Protocol = "mysql" // MySQL and MariaDB
)

// Schemes lists what an upstream may be written as, for errors and help.
const Schemes = "postgres://, postgresql://, mysql:// (or mariadb://), or the MySQL driver's DSN user:password@tcp(host:3306)/database"

// Upstream is the real server the proxy relays to.
type Upstream struct {
	Protocol Protocol
	// Addr is the server's host:port.
	Addr string
	raw  string
	// dsn: the MySQL driver's DSN form (not a URL).
	dsn bool
}

// SchemeError: the upstream is not written in a form the proxy speaks.
type SchemeError struct {
	Upstream string // redacted
	Reason   string
}

func (e *SchemeError) Error() string {
	return fmt.Sprintf("proxy: cannot relay to %s: %s — the proxy speaks %s", e.Upstream, e.Reason, Schemes)
}

// UpstreamError: the upstream server does not answer.
type UpstreamError struct {
	Protocol Protocol
	Addr     string
	Err      error
}

func (e *UpstreamError) Error() string {
	return fmt.Sprintf("proxy: cannot reach the %s server at %s (%v) — is it running? check --upstream", e.Protocol, e.Addr, e.Err)
}

func (e *UpstreamError) Unwrap() error { return e.Err }

// ParseUpstream reads an upstream URL or DSN (see Schemes).
func ParseUpstream(s string) (Upstream, error) {
	if strings.TrimSpace(s) == "" {
		return Upstream{}, &SchemeError{Upstream: `""`, Reason: "no upstream given"}
	}
	scheme, _, isURL := strings.Cut(s, "://")
	scheme = strings.ToLower(scheme)
	switch {
	case isURL && (scheme == "postgres" || scheme == "postgresql"):
		u, err := url.Parse(s)
		if err != nil {
			return Upstream{}, &SchemeError{Upstream: sqldb.RedactPostgres(s), Reason: "not a valid URL: " + urlReason(err)}
		}
		if strings.Contains(u.Host, ",") {
			return Upstream{}, &SchemeError{Upstream: sqldb.RedactPostgres(s), Reason: "the proxy relays to one server: name one host"}
		}
		if u.Query().Has("host") {
			return Upstream{}, &SchemeError{Upstream: sqldb.RedactPostgres(s), Reason: "the proxy relays over TCP: name the host in the URL, not in ?host="}
		}
		host, port := u.Hostname(), u.Port()
		if host == "" {
			host = "localhost"
		}
		if port == "" {
			port = "5432"
		}
		return Upstream{Protocol: Postgres, Addr: net.JoinHostPort(host, port), raw: s}, nil
	case isURL && (scheme == "mysql" || scheme == "mariadb"):
		cfg, err := sqldb.MySQLConfig(s)
		if err != nil {
			return Upstream{}, &SchemeError{Upstream: sqldb.RedactMySQL(s), Reason: err.Error()}
		}
		return Upstream{Protocol: MySQL, Addr: cfg.Addr, raw: s}, nil
	case isURL:
		return Upstream{}, &SchemeError{Upstream: redactURL(s), Reason: fmt.Sprintf("unknown scheme %q", scheme)}
	case strings.Contains(s, "@tcp(") || strings.HasPrefix(s, "tcp("):
		cfg, err := sqldb.MySQLConfig(s)
		if err != nil {
			return Upstream{}, &SchemeError{Upstream: sqldb.RedactMySQL(s), Reason: err.Error()}
		}
		return Upstream{Protocol: MySQL, Addr: cfg.Addr, raw: s, dsn: true}, nil
	}
	return Upstream{}, &SchemeError{Upstream: sqldb.RedactMySQL(sqldb.RedactPostgres(s)), Reason: "not a URL the proxy knows, nor a MySQL DSN over tcp(…)"}
}

func urlReason(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error() // url.Error repeats the URL, password included
	}
	return err.Error()
}

func redactURL(s string) string {
	if u, err := url.Parse(s); err == nil {
		return u.Redacted()
	}
	return "the upstream"
}

// Rewrite is the upstream's URL or DSN with addr in place of the
// server's host and port: what the service connects to. A setting that
// demands TLS is turned off, since the proxy speaks plaintext.
func (u Upstream) Rewrite(addr string) string {
	if u.dsn {
		i := strings.Index(u.raw, "tcp(")
		j := strings.Index(u.raw[i:], ")")
		out := u.raw[:i+4] + addr + u.raw[i+j:]
		return setQuery(out, "tls", "false", func(v string) bool { return v != "" && v != "false" })
	}
	pu, err := url.Parse(u.raw)
	if err != nil {
		return u.raw
	}
	pu.Host = addr
	q := pu.Query()
	if u.Protocol == Postgres {
		if m := q.Get("sslmode"); m != "" && m != "disable" && m != "allow" && m != "prefer" {
			q.Set("sslmode", "disable")
			pu.RawQuery = q.Encode()
		}
	} else if t := q.Get("tls"); t != "" && t != "false" {
		q.Set("tls", "false")
		pu.RawQuery = q.Encode()
	}
	return pu.String()
}

// setQuery sets a DSN's ?name=value when the present value is one that
// change says to change.
func setQuery(dsn, name, value string, change func(string) bool) string {
	base, query, ok := strings.Cut(dsn, "?")
	if !ok {
		return dsn
	}
	parts := strings.Split(query, "&")
	for i, p := range parts {
		k, v, _ := strings.Cut(p, "=")
		if k == name && change(v) {
			parts[i] = name + "=" + value
		}
	}
	return base + "?" + strings.Join(parts, "&")
}

// Redact hides the password of a URL or DSN in protocol pr's forms.
func Redact(pr Protocol, s string) string {
	if pr == Postgres {
		return sqldb.RedactPostgres(s)
	}
	return sqldb.RedactMySQL(s)
}
