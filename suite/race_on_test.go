//go:build race

package suite_test

// raceDetector: the race detector changes what a program allocates (and
// slows the YAML library tenfold), so memory figures are measured without it.
const raceDetector = true
