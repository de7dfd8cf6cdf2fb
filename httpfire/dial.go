package httpfire

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"
)

// dial opens one warmed connection to the target: TCP, and TLS with the
// given ALPN protocols for https. Connection setup never enters a burst.
func (t *Target) dial(ctx context.Context, alpn []string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, t.c.timeout)
	defer cancel()
	dial := t.p.Dial
	if dial == nil {
		d := &net.Dialer{KeepAlive: 30 * time.Second}
		dial = d.DialContext
	}
	nc, err := dial(ctx, "tcp", t.c.addr)
	if err != nil {
		return nil, t.dialError(ctx, err)
	}
	if tcp, ok := nc.(*net.TCPConn); ok {
		// Each release write must leave at once, not wait for Nagle.
		_ = tcp.SetNoDelay(true)
	}
	if t.c.scheme != "https" {
		return nc, nil
	}
	tc := tls.Client(nc, &tls.Config{
		ServerName:         t.c.hostname,
		InsecureSkipVerify: t.c.cfg.Insecure, //nolint:gosec // asked for, for local targets
		NextProtos:         alpn,
	})
	if err := tc.HandshakeContext(ctx); err != nil {
		nc.Close()
		return nil, t.tlsError(ctx, err)
	}
	return tc, nil
}

// ConnectError is a target that could not be reached: nothing was sent.
type ConnectError struct {
	Addr string
	Msg  string
	Err  error
}

func (e *ConnectError) Error() string { return e.Msg }
func (e *ConnectError) Unwrap() error { return e.Err }

func (t *Target) dialError(ctx context.Context, err error) error {
	addr := t.c.addr
	var dns *net.DNSError
	switch {
	case errors.As(err, &dns):
		return &ConnectError{addr, fmt.Sprintf("cannot resolve %s (%v) — check the host in the URL", t.c.hostname, dns.Err), err}
	case errors.Is(err, syscall.ECONNREFUSED):
		return &ConnectError{addr, fmt.Sprintf("cannot connect to %s (connection refused) — is the server running, on this port?", addr), err}
	case errors.Is(ctx.Err(), context.DeadlineExceeded) || isTimeout(err):
		return &ConnectError{addr, fmt.Sprintf("cannot connect to %s within %s — is the host reachable? (raise --timeout if it is slow)", addr, t.c.timeout), err}
	case errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH):
		return &ConnectError{addr, fmt.Sprintf("cannot connect to %s (no route to host) — is the host reachable from here?", addr), err}
	}
	return &ConnectError{addr, fmt.Sprintf("cannot connect to %s: %v", addr, err), err}
}

func (t *Target) tlsError(ctx context.Context, err error) error {
	addr := t.c.addr
	var unknown x509.UnknownAuthorityError
	var host x509.HostnameError
	var invalid x509.CertificateInvalidError
	var verify *tls.CertificateVerificationError
	switch {
	case errors.As(err, &unknown) || errors.As(err, &host) || errors.As(err, &invalid) || errors.As(err, &verify):
		return &ConnectError{addr, fmt.Sprintf("TLS handshake with %s failed: %v — for a local server with a self-signed certificate add --insecure", addr, err), err}
	case errors.Is(ctx.Err(), context.DeadlineExceeded) || isTimeout(err):
		return &ConnectError{addr, fmt.Sprintf("TLS handshake with %s did not finish within %s — is it an HTTPS port? (use http:// for plain HTTP)", addr, t.c.timeout), err}
	}
	var rec tls.RecordHeaderError
	if errors.As(err, &rec) {
		return &ConnectError{addr, fmt.Sprintf("TLS handshake with %s failed: the server does not speak TLS (%v) — use http:// for plain HTTP", addr, err), err}
	}
	return &ConnectError{addr, fmt.Sprintf("TLS handshake with %s failed: %v", addr, err), err}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// aLongTimeAgo is a deadline already past: it wakes a blocked read at once.
var aLongTimeAgo = time.Unix(1, 0)
