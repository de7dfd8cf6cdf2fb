package serve_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/racetest/racetest/httpfire"
	"github.com/racetest/racetest/internal/testenv"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/memstore"
	"github.com/racetest/racetest/serve"
)

func newReplica(t *testing.T, scenario string, attached bool) *httptest.Server {
	t.Helper()
	ctx := context.Background()
	target, err := testenv.Registry(memstore.Register).Build(ctx, scenario, "memory", scenarios.Params{RunID: scenarios.NewRunID(), Latency: 50 * time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := serve.New(ctx, serve.Options{Target: target, Name: scenario, Workers: 4, Attached: attached, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { hs.Close(); srv.Close(context.Background()) })
	return hs
}

func call(t *testing.T, method, url string, body string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// One replica alone: the first attempt at a key executes, the next is
// declined, /effects counts one, and every arrival is timestamped.
func TestReplicaAlone(t *testing.T) {
	hs := newReplica(t, scenarios.ConditionalUpdate, false)
	code, h, body := call(t, "POST", hs.URL+"/attempt?key=abc", "")
	if code != http.StatusOK || h.Get(httpfire.ArrivalHeader) == "" {
		t.Fatalf("first attempt: %d %q (arrival %q)", code, body, h.Get(httpfire.ArrivalHeader))
	}
	var res serve.AttemptResult
	if err := json.Unmarshal([]byte(body), &res); err != nil || res.Outcome != "executed" || res.PID == 0 {
		t.Fatalf("first attempt body %q: %v", body, err)
	}
	code, _, body = call(t, "POST", hs.URL+"/attempt?key=abc", "")
	if code != http.StatusConflict || !strings.Contains(body, `"declined"`) {
		t.Fatalf("second attempt: %d %q", code, body)
	}
	if code, _, body = call(t, "GET", hs.URL+"/effects?key=abc", ""); code != 200 || strings.TrimSpace(body) != "1" {
		t.Fatalf("effects: %d %q", code, body)
	}
	if code, _, body = call(t, "GET", hs.URL+"/effects?key=other", ""); strings.TrimSpace(body) != "0" {
		t.Fatalf("effects of an untouched key: %d %q", code, body)
	}
	var a serve.Arrivals
	_, _, body = call(t, "GET", hs.URL+"/arrivals?key=abc", "")
	if err := json.Unmarshal([]byte(body), &a); err != nil || len(a.Arrivals) != 2 || a.Arrivals[1] < a.Arrivals[0] {
		t.Fatalf("arrivals %q: %v", body, err)
	}
	if code, _, _ := call(t, "POST", hs.URL+"/attempt", ""); code != http.StatusBadRequest {
		t.Errorf("an attempt without a subject answered %d, want 400", code)
	}
}

// Many attempts at once on a check-then-write replica: the replica races
// like the in-process scenario, and its effects agree with the 200s.
func TestReplicaConcurrentAttempts(t *testing.T) {
	hs := newReplica(t, scenarios.CheckThenWrite, false)
	for k := range 5 {
		key := "k" + strconv.Itoa(k)
		var wg sync.WaitGroup
		var mu sync.Mutex
		ok := 0
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, err := http.Post(hs.URL+"/attempt?key="+key, "", nil)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				if resp.StatusCode == 200 {
					mu.Lock()
					ok++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		_, _, body := call(t, "GET", hs.URL+"/effects?key="+key, "")
		if n, _ := strconv.Atoi(strings.TrimSpace(body)); n != ok || n < 1 {
			t.Errorf("%s: %d answers said executed, the store counted %q", key, ok, body)
		}
	}
}

// Attached, a replica attempts only bursts its parent announced.
func TestAttachedReplica(t *testing.T) {
	hs := newReplica(t, scenarios.UniqueInsert, true)
	if code, _, body := call(t, "POST", hs.URL+"/attempt?burst=3", ""); code != http.StatusConflict || !strings.Contains(body, "not announced") {
		t.Fatalf("unannounced burst: %d %q", code, body)
	}
	j, _ := json.Marshal(serve.EncodeSubject(runner.Subject{Burst: 3, Key: "the-key", Data: int64(42)}))
	if code, _, body := call(t, "POST", hs.URL+"/subject", string(j)); code != 200 {
		t.Fatalf("announce: %d %q", code, body)
	}
	if code, _, body := call(t, "POST", hs.URL+"/attempt?burst=3&worker=1", ""); code != 200 {
		t.Fatalf("announced burst: %d %q", code, body)
	}
}

func TestSubjectRoundTrip(t *testing.T) {
	for _, d := range []any{nil, 7, int64(1 << 40), "tok", 2.5, true} {
		s := runner.Subject{Burst: 1, Key: "k", Data: d}
		j := serve.EncodeSubject(s)
		raw, _ := json.Marshal(j)
		var back serve.SubjectJSON
		json.Unmarshal(raw, &back)
		got, opaque, err := back.Decode()
		if err != nil || opaque || got != s {
			t.Errorf("%T %v: got %+v (opaque %v, %v)", d, d, got, opaque, err)
		}
	}
	type private struct{ a int }
	if _, opaque, _ := serve.EncodeSubject(runner.Subject{Data: private{1}}).Decode(); !opaque {
		t.Error("a struct travelled as a plain value")
	}
	if _, _, err := (serve.SubjectJSON{Data: &serve.DataJSON{Kind: "int", Value: json.RawMessage(`"x"`)}}).Decode(); err == nil {
		t.Error("bad data decoded")
	}
}

// attachRecorder is a target whose replicas must attach: it records which
// of Prepare, Attach and Cleanup a replica called.
type attachRecorder struct {
	runner.Target
	mu        sync.Mutex
	calls     []string
	attachErr error
}

func (a *attachRecorder) record(name string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls = append(a.calls, name)
}

func (a *attachRecorder) Prepare(ctx context.Context) error {
	a.record("prepare")
	return a.Target.Prepare(ctx)
}

func (a *attachRecorder) Cleanup(ctx context.Context) error {
	a.record("cleanup")
	return a.Target.Cleanup(ctx)
}

func (a *attachRecorder) Attach(context.Context) error {
	a.record("attach")
	return a.attachErr
}

// An attached replica attaches to its parent's store and never prepares or
// cleans it up; a replica alone prepares and cleans up, and never attaches.
// A failed attach stops the replica with the target's words.
func TestAttachedReplicaAttaches(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		attached bool
		err      error
		want     string
	}{
		{true, nil, "attach"},
		{false, nil, "prepare cleanup"},
		{true, errors.New("table racetest_x_t does not exist"), "attach"},
	} {
		target, err := testenv.Registry(memstore.Register).Build(ctx, scenarios.MemorySet, "memory", scenarios.Params{RunID: scenarios.NewRunID()})
		if err != nil {
			t.Fatal(err)
		}
		rec := &attachRecorder{Target: target, attachErr: c.err}
		srv, err := serve.New(ctx, serve.Options{Target: rec, Workers: 1, Attached: c.attached})
		switch {
		case c.err != nil && (err == nil || !strings.Contains(err.Error(), "does not exist")):
			t.Errorf("attach failed with %v, but New returned %v", c.err, err)
		case c.err == nil && err != nil:
			t.Fatal(err)
		case err == nil:
			srv.Close(ctx)
		}
		if got := strings.Join(rec.calls, " "); got != c.want {
			t.Errorf("attached=%v, attach error %v: calls %q, want %q", c.attached, c.err, got, c.want)
		}
	}
}
