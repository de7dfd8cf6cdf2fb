package report

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// FuzzReadDocument: 'racetest report' reads a JSON report from a file a
// user names; no bytes may panic it, and a document it rebuilds renders in
// every format, and its JSON reads back.
// Run it for real with: go test -run '^$' -fuzz '^FuzzReadDocument$' ./report
func FuzzReadDocument(f *testing.F) {
	if b, err := os.ReadFile("testdata/report.json"); err == nil {
		f.Add(b)
		f.Add(bytes.Replace(b, []byte(`"per_burst"`), []byte(`"per_bursts"`), 1))
	}
	f.Add([]byte(`{"schema": "` + SchemaVersion + `", "runs": [{}]}`))
	f.Add([]byte(`{"schema": "` + SchemaVersion + `", "runs": [{"per_burst": {"effects": [1, -1]}}]}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`[`))
	f.Fuzz(func(t *testing.T, data []byte) {
		doc, err := ReadDocument(bytes.NewReader(data))
		if err != nil {
			return
		}
		cases, err := doc.Cases()
		if err != nil {
			return
		}
		for _, c := range cases {
			Assess(c)
		}
		for _, f := range AllFormats() {
			var out bytes.Buffer
			if err := f.Run(&out, cases, Options{Timeline: true, Version: doc.Version}); err != nil {
				continue
			}
			if f.Name != "json" {
				continue
			}
			again, err := ReadDocument(&out)
			if err != nil {
				t.Fatalf("the JSON written from a document read back does not read: %v\n%s", err, out.String())
			}
			if _, err := again.Cases(); err != nil {
				t.Fatalf("the JSON written from a document read back does not rebuild: %v", err)
			}
		}
	})
}

// A report with figures racetest never writes (a negative spread or overlap, a
// time no time.Duration holds, a count near the ints' limit) is refused with
// the field and burst named: the HTML histograms indexed their bars by a
// negative spread or overlap, and panicked.
func TestReadRefusesFiguresRacetestNeverWrites(t *testing.T) {
	b, err := os.ReadFile("testdata/report.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ from, to, want string }{
		{`"spread_us": 12,`, `"spread_us": -12,`, "burst 0: spread_us is -12 µs"},
		{`"duration_us": 0,`, `"duration_us": 1e300,`, "burst 0: duration_us is 1e+300 µs"},
		{`"spread_us": 12,`, `"spread_us": 9.3e15,`, "spread_us is 9.3e+15 µs"},
		{`"overlap": 3,`, `"overlap": -1,`, "burst 0: overlap is -1,"},
		{`"executed": 2`, `"executed": -2`, "outcomes.executed is -2,"},
		{`"attempts_per_burst": 3,`, `"attempts_per_burst": 9223372036854775807,`, "attempts_per_burst is 9223372036854775807,"},
		{`"effects": 2,`, `"effects": -2000000000000,`, "effects is -2000000000000,"},
		// maxMicros itself: 2^63 ns, one past what a time.Duration holds.
		{`"spread_us": 12,`, `"spread_us": 9223372036854775.807,`, "spread_us is 9.223372036854776e+15 µs"},
		// The run is named, counted from 1.
		{`"overlap": 3,`, `"overlap": -1,`, "run 1 (check-then-write on memory): burst 0: overlap"},
	} {
		doc, err := ReadDocument(bytes.NewReader(bytes.Replace(b, []byte(tc.from), []byte(tc.to), 1)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := doc.Cases(); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "never writes") {
			t.Errorf("%s: %v, want an error with %q", tc.to, err, tc.want)
		}
	}
	// The largest duration a time.Duration holds still reads, and so do
	// effects below zero (a store's change can be).
	// So do counts of exactly maxCount (2^40), either way for effects.
	for _, ok := range [][2]string{{`"spread_us": 12,`, `"spread_us": 9.2e15,`}, {`"effects": 2,`, `"effects": -2,`},
		{`"effects": 2,`, `"effects": 1099511627776,`}, {`"effects": 2,`, `"effects": -1099511627776,`}} {
		doc, _ := ReadDocument(bytes.NewReader(bytes.Replace(b, []byte(ok[0]), []byte(ok[1]), 1)))
		if _, err := doc.Cases(); err != nil {
			t.Errorf("%s: %v", ok[1], err)
		}
	}
}
