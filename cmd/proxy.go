package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/racetest/racetest/proxy"
	"github.com/spf13/cobra"
)

// proxyOptions are the parsed flags of 'racetest proxy'.
type proxyOptions struct {
	*factory
	Upstream string
	Listen   string
	Control  string
	Settle   time.Duration
}

// newCmdProxy builds 'racetest proxy': a database wire proxy that the
// service's DATABASE_URL points at. Tests pass runF to capture the
// options.
func newCmdProxy(f *factory, runF func(context.Context, *proxyOptions) error) *cobra.Command {
	opts := &proxyOptions{factory: f}
	c := &cobra.Command{
		Use:   "proxy --upstream URL",
		Short: "Stand between a service and its PostgreSQL or MySQL server, to force each burst's race (see docs/proxy.md)",
		Long: `proxy relays a service's database connections to the real server, every byte
unchanged, until a burst asks it to act. During a burst it holds each connection's
first statement that writes or locks (INSERT, UPDATE, DELETE, MERGE, SELECT … FOR
UPDATE/SHARE, and their prepared forms) until every request of the burst has reached
one, waits on a lock at the server, or has finished; then it releases them together,
so a check-then-write race happens on every burst, whatever the service's timing.

Point the service's DATABASE_URL at the URL it prints. Clients connect in plaintext:
one that asks for TLS is told the server has none (PostgreSQL answers N to
SSLRequest; MySQL's greeting loses CLIENT_SSL). Bursts are begun and ended on the
control address, which 'racetest http --proxy' takes. It runs until interrupted;
Ctrl-C releases whatever it holds.`,
		Example: `  racetest proxy --upstream postgres://app:secret@127.0.0.1:5432/shop --listen 127.0.0.1:6432
  DATABASE_URL=postgres://app:secret@127.0.0.1:6432/shop ./my-service
  racetest proxy --upstream 'root@tcp(127.0.0.1:3306)/shop' --listen 0.0.0.0:3307 --control 127.0.0.1:7070`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runProxy(c.Context(), opts)
		},
	}
	fs := c.Flags()
	fs.StringVar(&opts.Upstream, "upstream", "", "the real server: "+proxy.Schemes)
	fs.StringVar(&opts.Listen, "listen", proxy.DefaultListen, "where the service connects (HOST:PORT; port 0 picks a free one)")
	fs.StringVar(&opts.Control, "control", proxy.DefaultControl, "where bursts are begun and ended: the address 'racetest http --proxy' takes")
	fs.DurationVar(&opts.Settle, "settle", proxy.DefaultSettle, "how long a connection with nothing in flight stays quiet to count as finished, when the burst's requests are not reported")
	return c
}

func runProxy(ctx context.Context, o *proxyOptions) error {
	if o.Upstream == "" {
		return usageErrorf("--upstream is required: the server the service would use, e.g. postgres://app@127.0.0.1:5432/shop or 'root@tcp(127.0.0.1:3306)/shop'")
	}
	if _, err := proxy.ParseUpstream(o.Upstream); err != nil {
		return usageError(err)
	}
	for _, a := range []struct{ flag, addr string }{{"listen", o.Listen}, {"control", o.Control}} {
		if _, port, err := net.SplitHostPort(a.addr); err != nil {
			return usageErrorf("--%s %q is not HOST:PORT (%v): write it as 127.0.0.1:6432, or :0 for a free port", a.flag, a.addr, err)
		} else if _, err := net.LookupPort("tcp", port); err != nil {
			return usageErrorf("--%s %q: %q is not a port: write it as 127.0.0.1:6432, or :0 for a free port", a.flag, a.addr, port)
		}
	}
	if err := checkDurations(durationFlag{"settle", o.Settle}); err != nil {
		return err
	}
	if o.Settle == 0 {
		return usageErrorf("--settle must be more than 0: a connection is finished only after some quiet")
	}
	p, err := proxy.Start(ctx, proxy.Config{Upstream: o.Upstream, Listen: o.Listen, Control: o.Control, Settle: o.Settle})
	var se *proxy.SchemeError
	switch {
	case errors.As(err, &se):
		return usageError(err)
	case err != nil:
		return setupError(err)
	}
	defer p.Close()
	printProxyHelp(o.IO.Out, p)
	<-ctx.Done()
	p.Close()
	// A stop asked for (Ctrl-C, SIGTERM) is this command's normal end.
	return nil
}

// printProxyHelp says where the service connects and where bursts are
// controlled. The first line is the service's URL, for a script to read.
func printProxyHelp(w io.Writer, p *proxy.Proxy) {
	fmt.Fprintf(w, `service URL: %s
control:     %s
racetest proxy: relaying %s to the server, every byte unchanged outside a burst
  point the service's DATABASE_URL at the service URL (the password as the service already has it;
  plaintext: a client that demands TLS is refused)
  then: racetest http … --proxy %s
  Ctrl-C stops the proxy and releases whatever it holds
`, proxy.Redact(p.Protocol(), p.ServiceURL()), p.ControlAddr(), p.Protocol(), p.ControlAddr())
}
