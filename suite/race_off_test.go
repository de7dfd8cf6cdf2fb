//go:build !race

package suite_test

const raceDetector = false
