package httpfire

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
	"time"

	"github.com/racetest/racetest/runner"
)

// naiveApp is the reference launcher: what a script with a goroutine per
// request and a default client does. Each attempt dials its own connection
// after the gate, so connection setup lands inside the burst.
type naiveApp struct{ t *Target }

func (a naiveApp) Session(context.Context, int) (runner.Session, error) {
	return naiveSession(a), nil
}
func (naiveApp) Close() error { return nil }

type naiveSession struct{ t *Target }

func (s naiveSession) Attempt(ctx context.Context, subj runner.Subject, w *runner.Worker) runner.Outcome {
	b, ok := subj.Data.(*burst)
	if !ok {
		return runner.Failed(errors.New("httpfire: the subject was not made by this target"))
	}
	b.attempts.Add(1)
	r, err := s.t.c.render(b.varsFor(w.ID))
	if err != nil {
		return b.outcome(runner.Failed(err))
	}
	var wrote atomic.Bool
	var wroteAt atomic.Int64 // Unix ns: the response time runs from here, past the dial
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) {
		wroteAt.Store(time.Now().UnixNano())
		wrote.Store(true)
	}})
	req, err := http.NewRequestWithContext(ctx, s.t.c.method, r.url.String(), bytes.NewReader(r.body))
	if err != nil {
		return b.outcome(runner.Failed(err))
	}
	if len(r.body) == 0 {
		req.Body = http.NoBody
	}
	for _, h := range r.headers {
		if h[0] == "Host" {
			req.Host = h[1]
			continue
		}
		req.Header.Add(h[0], h[1])
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", userAgent)
	}
	tr := &http.Transport{
		DisableKeepAlives: true,
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: s.t.c.cfg.Insecure}, //nolint:gosec // asked for
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	b.sent(time.Now())
	resp, err := client.Do(req)
	if err != nil {
		if !wrote.Load() {
			return b.outcome(runner.Failed(fmt.Errorf("sending the request: %w", err)))
		}
		return b.outcome(runner.Outcome{Class: runner.Unknown, Err: fmt.Errorf("no response (the request may have run): %w", err)})
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBodyKept))
	if err != nil {
		return b.outcome(runner.Outcome{Class: runner.Unknown, Err: fmt.Errorf("reading the response body: %w", err)})
	}
	var took time.Duration
	if at := wroteAt.Load(); at != 0 {
		took = time.Since(time.Unix(0, at))
	}
	b.answer(resp.StatusCode, resp.Header, resp.Proto, took)
	return b.outcome(s.t.c.rules.classify(resp.StatusCode, body))
}

func (naiveSession) Close() error { return nil }
