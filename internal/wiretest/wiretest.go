// Package wiretest gives tests the wire releases a run uses by default. It
// is apart from scenarios/conformance, which the release package's own
// tests import.
package wiretest

import (
	"testing"

	"github.com/racetest/racetest/release"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
)

// LastByte is a conformance Suite's Release for the last-byte wire release
// on backend, the default of a run there: it fails the test where that
// release does not apply as is.
func LastByte(backend string) func(t *testing.T) (scenarios.DialFunc, []runner.Option) {
	return func(t *testing.T) (scenarios.DialFunc, []runner.Option) {
		t.Helper()
		rel, err := release.New(string(release.LastByte), backend)
		if err != nil || rel.Warning != "" {
			t.Fatalf("last-byte on %s: %v %s", backend, err, rel.Warning)
		}
		return rel.Dial, rel.Options()
	}
}
