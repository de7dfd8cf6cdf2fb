package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The control API, HTTP and JSON on the control listener:
//
//	GET  /racetest-proxy            Info: proves the address is a racetest proxy
//	POST /bursts                    BurstSpec → {"burst": id}
//	POST /bursts/{id}/done          one request of the burst has its answer
//	POST /bursts/{id}/end           → Account
//
// Errors are {"error": "…"} with 400 (a bad request), 404 (no such
// burst) or 409 (a burst is already active).

// Service is Info's Service: what a racetest proxy answers.
const Service = "racetest-proxy"

// Info is what a proxy says about itself.
type Info struct {
	Service  string   `json:"service"`
	Protocol Protocol `json:"protocol"`
	// Listen is where services connect; Upstream the server's address.
	Listen   string `json:"listen"`
	Upstream string `json:"upstream"`
}

type begun struct {
	Burst int64 `json:"burst"`
}

type apiError struct {
	Error string `json:"error"`
}

func (p *Proxy) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /racetest-proxy", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, Info{Service: Service, Protocol: p.upstream.Protocol, Listen: p.Addr(), Upstream: p.upstream.Addr})
	})
	mux.HandleFunc("POST /bursts", func(w http.ResponseWriter, r *http.Request) {
		var spec BurstSpec
		dec := json.NewDecoder(io.LimitReader(r.Body, 1<<16))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&spec); err != nil {
			writeJSON(w, http.StatusBadRequest, apiError{"a burst is {\"attempts\": N, \"timeout\": nanoseconds}: " + err.Error()})
			return
		}
		id, err := p.Begin(spec)
		switch {
		case errors.Is(err, ErrBurstActive):
			writeJSON(w, http.StatusConflict, apiError{err.Error()})
		case err != nil:
			writeJSON(w, http.StatusBadRequest, apiError{err.Error()})
		default:
			writeJSON(w, http.StatusCreated, begun{id})
		}
	})
	mux.HandleFunc("POST /bursts/{id}/done", func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, apiError{"a burst id is a number"})
			return
		}
		if err := p.Done(id); err != nil {
			writeJSON(w, http.StatusNotFound, apiError{err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, begun{id})
	})
	mux.HandleFunc("POST /bursts/{id}/end", func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, apiError{"a burst id is a number"})
			return
		}
		a, err := p.End(id)
		if err != nil {
			writeJSON(w, http.StatusNotFound, apiError{err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, a)
	})
	return mux
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

// Client talks to a proxy's control API.
type Client struct {
	base string
	hc   *http.Client
	// Info is what the proxy said about itself when dialled.
	Info Info
}

// NotProxyError: the control address does not answer as a racetest
// proxy (nothing listens, or something else does).
type NotProxyError struct {
	Addr   string
	Reason string
}

func (e *NotProxyError) Error() string {
	return fmt.Sprintf("proxy: %s is not a racetest proxy's control address (%s) — pass the control address 'racetest proxy' printed", e.Addr, e.Reason)
}

// Dial connects to the control API at addr (host:port, or an http://
// URL) and checks that a racetest proxy answers there: anything else is
// a *NotProxyError.
func Dial(ctx context.Context, addr string) (*Client, error) {
	base := addr
	if !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, &NotProxyError{Addr: addr, Reason: "not HOST:PORT"}
		}
		base = "http://" + addr
	}
	base = strings.TrimRight(base, "/")
	c := &Client{base: base, hc: &http.Client{}}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/racetest-proxy", nil)
	if err != nil {
		return nil, &NotProxyError{Addr: addr, Reason: err.Error()}
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, &NotProxyError{Addr: addr, Reason: shortNetErr(err)}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &c.Info) != nil || c.Info.Service != Service {
		return nil, &NotProxyError{Addr: addr, Reason: fmt.Sprintf("it answered %s, not a racetest proxy's greeting", resp.Status)}
	}
	return c, nil
}

func shortNetErr(err error) string {
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) {
		if inner := ue.Unwrap(); inner != nil {
			return inner.Error()
		}
	}
	return err.Error()
}

// Begin starts a burst on the proxy.
func (c *Client) Begin(ctx context.Context, spec BurstSpec) (int64, error) {
	var b begun
	if err := c.post(ctx, "/bursts", spec, &b); err != nil {
		return 0, err
	}
	return b.Burst, nil
}

// Done reports that one request of burst id has its answer (see
// BurstSpec.Reports).
func (c *Client) Done(ctx context.Context, id int64) error {
	var b begun
	return c.post(ctx, "/bursts/"+strconv.FormatInt(id, 10)+"/done", nil, &b)
}

// End ends burst id and returns its account.
func (c *Client) End(ctx context.Context, id int64) (*Account, error) {
	var a Account
	if err := c.post(ctx, "/bursts/"+strconv.FormatInt(id, 10)+"/end", nil, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

func (c *Client) post(ctx context.Context, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("proxy %s: %w", c.base, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("proxy %s: reading its answer: %w", c.base, err)
	}
	if resp.StatusCode >= 300 {
		var e apiError
		if json.Unmarshal(data, &e) == nil && e.Error != "" {
			if resp.StatusCode == http.StatusConflict {
				return fmt.Errorf("%w (%s)", ErrBurstActive, c.base)
			}
			return fmt.Errorf("proxy %s: %s", c.base, e.Error)
		}
		return fmt.Errorf("proxy %s: %s", c.base, resp.Status)
	}
	return json.Unmarshal(data, out)
}
