package cmd

import (
	"encoding/json"
	"maps"
	"strings"
	"testing"

	"github.com/racetest/racetest/report"
	"github.com/racetest/racetest/scenarios"
)

// A report lists the knobs a reader needs to reproduce the run, and only
// those that differ from racetest's defaults: a default is not a setting.
// The memory backend's latency and seed always show, since they drive its
// jitter. --ttl 0 means the scenario's default lease, so it shows no ttl.
func TestReportShowsTheKnobsThatDifferFromTheDefaults(t *testing.T) {
	reg := scriptedRegistry(scenarios.ExpectSafe)
	memory := map[string]string{"latency": "200µs", "seed": "7"}
	for _, tc := range []struct {
		flags []string
		want  map[string]string
	}{
		{nil, memory},
		{[]string{"--gap", "0", "--replicas", "1", "--waves", "1", "--ttl", "50ms", "--timeout", "10s"}, memory},
		{[]string{"--ttl", "0"}, memory},
		{[]string{"--gap", "1ms"}, with(memory, "gap", "1ms")},
		{[]string{"--replicas", "2"}, with(memory, "replicas", "2")},
		{[]string{"--ttl", "70ms"}, with(memory, "ttl", "70ms")},
		{[]string{"--timeout", "3s"}, with(memory, "timeout", "3s")},
		{[]string{"--waves", "2"}, with(with(memory, "waves", "2"), "deploy", "false")},
	} {
		args := append([]string{"run", "v-safe", "-n", "2", "--bursts", "1", "--seed", "7", "--format", "json"}, tc.flags...)
		out, errOut, code := execWith(t, reg, args...)
		if code != exitOK {
			t.Errorf("%s: exit %d\n%s", strings.Join(args, " "), code, errOut)
			continue
		}
		var doc report.Document
		if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc.Runs) != 1 {
			t.Errorf("%s: not a one-run JSON report (%v):\n%s", strings.Join(args, " "), err, out)
			continue
		}
		if got := doc.Runs[0].Settings; !maps.Equal(got, tc.want) {
			t.Errorf("%s: settings %v, want %v", strings.Join(args, " "), got, tc.want)
		}
	}
}

func with(m map[string]string, k, v string) map[string]string {
	out := maps.Clone(m)
	out[k] = v
	return out
}
