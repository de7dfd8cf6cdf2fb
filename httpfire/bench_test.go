package httpfire_test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/racetest/racetest/httpfire"
	"github.com/racetest/racetest/httpfire/httpfiretest"
	"github.com/racetest/racetest/runner"
)

// BenchmarkRelease measures, for each release mode, how closely a burst's
// requests arrive at a check-then-write endpoint whose window is 100µs, and
// how often a burst exposes the race. One iteration is a run of 200 bursts:
//
//	go test ./httpfire -run '^$' -bench Release -benchtime 1x
//
// The endpoint's window is an I/O wait (see httpfiretest.CheckThenWrite);
// the spin/ rows use a CPU-bound one instead. Metrics: srv-µs is the median arrival spread measured at the server (first
// to last request fully read), cli-µs the median client-side release spread
// (first to last request leaving), exposed-% the share of bursts with more
// than one write.
func BenchmarkRelease(b *testing.B) {
	// The endpoint answers a millisecond after its window, as a real one
	// would after more work, so that a burst's first answers do not compete
	// with its last arrivals for the two cores this was measured on.
	const window, tail, bursts = 100 * time.Microsecond, time.Millisecond, 200
	rows := []struct {
		mode   httpfire.Release
		server string
	}{
		{httpfire.Naive, plainH1},
		{httpfire.Barrier, plainH1},
		{httpfire.LastByte, plainH1},
		{httpfire.SinglePacket, h2c},
		{httpfire.SinglePacket, tlsH2},
	}
	for _, spin := range []bool{false, true} {
		for _, n := range []int{20, 64} {
			for _, row := range rows {
				name := fmt.Sprintf("N=%d/%s/%s", n, row.mode, row.server)
				if spin {
					name = "spin/" + name
				}
				b.Run(name, func(b *testing.B) {
					for range b.N {
						ctw := httpfiretest.NewCheckThenWrite(window)
						ctw.Spin = spin
						ctw.Tail = tail
						srv := newServer(b, row.server, ctw)
						target, err := httpfire.New(ctwConfig(srv, row.mode), params())
						if err != nil {
							b.Fatal(err)
						}
						res, err := runner.Run(context.Background(), target, runner.Attempts(n), runner.Bursts(bursts), runner.Timeout(10*time.Second))
						if err != nil {
							b.Fatal(err)
						}
						var srvSpread []time.Duration
						for _, k := range ctw.Keys() {
							if d, ok := ctw.ArrivalSpread(k); ok {
								srvSpread = append(srvSpread, d)
							}
						}
						client, _ := target.Spreads()
						out := res.Outcomes()
						b.ReportMetric(micros(medianOf(srvSpread)), "srv-µs")
						b.ReportMetric(micros(medianOf(client)), "cli-µs")
						b.ReportMetric(100*float64(res.Violations())/float64(len(res.Bursts)), "exposed-%")
						b.ReportMetric(float64(out[runner.Error]+out[runner.Unknown]), "failed")
						srv.Close()
					}
				})
			}
		}
	}
}

func micros(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

func medianOf(xs []time.Duration) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), xs...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}
