package report

import (
	"bytes"
	"os"
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
