package incidents

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"
)

// provider is a simulated payment provider: a local HTTP server that counts
// payments on its own side. Its switch drops the response to a user's next
// payment after the payment was made, as a lost response does; it honours an
// Idempotency-Key by answering a repeated key without paying again.
type provider struct {
	srv       *httptest.Server
	closeOnce sync.Once

	mu       sync.Mutex
	payments map[string]int  // per user: the ground truth of external payments
	keys     map[string]bool // idempotency keys already paid
	drop     map[string]bool // users whose next response is dropped
	dropped  int
	replayed int
}

type payRequest struct {
	User   string `json:"user"`
	Reward string `json:"reward"`
	Amount int    `json:"amount"`
}

func newProvider() *provider {
	p := &provider{payments: map[string]int{}, keys: map[string]bool{}, drop: map[string]bool{}}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	return p
}

func (p *provider) URL() string { return p.srv.URL }

func (p *provider) Close() { p.closeOnce.Do(p.srv.Close) }

// dropNextResponse makes the provider pay user's next payment and then close
// the connection without answering.
func (p *provider) dropNextResponse(user string) {
	p.mu.Lock()
	p.drop[user] = true
	p.mu.Unlock()
}

func (p *provider) count(user string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.payments[user]
}

func (p *provider) stats() (dropped, replayed int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dropped, p.replayed
}

func (p *provider) serve(w http.ResponseWriter, r *http.Request) {
	var req payRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.User == "" || req.Amount <= 0 {
		http.Error(w, "bad payment request", http.StatusBadRequest)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	p.mu.Lock()
	if key != "" && p.keys[key] {
		p.replayed++
		p.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"status":"paid","replayed":true}`)
		return
	}
	p.payments[req.User]++
	if key != "" {
		p.keys[key] = true
	}
	drop := p.drop[req.User]
	delete(p.drop, req.User)
	if drop {
		p.dropped++
	}
	p.mu.Unlock()
	if drop {
		// Paid, but the caller never hears of it.
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				conn.Close()
				return
			}
		}
	}
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"status":"paid"}`)
}

// payClient is one replica's HTTP client to the provider.
func payClient(workers int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		MaxIdleConnsPerHost: max(workers, 1),
		// The provider is local; a dropped response must fail fast.
		ResponseHeaderTimeout: 5 * time.Second,
	}}
}

// payAttempts is how many times the app calls the provider before giving up.
const payAttempts = 3

// payExternal calls the provider, retrying when no answer came back — the
// natural reaction to a lost response, and the one that pays twice unless
// the call carries an idempotency key.
func payExternal(ctx context.Context, c *http.Client, url string, req payRequest, idempotencyKey string) (calls int, err error) {
	body, err := json.Marshal(req)
	if err != nil {
		return 0, err
	}
	for calls = 1; ; calls++ {
		err = payOnce(ctx, c, url, body, idempotencyKey)
		if err == nil || calls == payAttempts || ctx.Err() != nil {
			return calls, err
		}
	}
}

func payOnce(ctx context.Context, c *http.Client, url string, body []byte, idempotencyKey string) error {
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/pay", bytes.NewReader(body))
	if err != nil {
		return err
	}
	hr.Header.Set("Content-Type", "application/json")
	if idempotencyKey != "" {
		hr.Header.Set("Idempotency-Key", idempotencyKey)
	}
	resp, err := c.Do(hr)
	if err != nil {
		return fmt.Errorf("payment provider: no answer: %w", err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("payment provider answered %s", resp.Status)
	}
	return nil
}
