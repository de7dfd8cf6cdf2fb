// Package faults holds racetest's fault-injection tests:
// a racetest process runs against a private server (internal/privserver)
// that is killed with SIGKILL or paused with SIGSTOP mid-run, and the tests
// check what the README promises: racetest stops within its bound, reports
// the bursts it finished, exits 3 (130 when interrupted), and
// 'racetest clean' then leaves nothing.
//
// They start servers of their own and take about a minute, so they run
// only with RACETEST_FAULTS=1 (a step of .ci/run):
//
//	RACETEST_FAULTS=1 go test -count=1 ./internal/faults ./internal/privserver
package faults
