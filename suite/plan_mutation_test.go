package suite_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/racetest/racetest/suite"
)

// The plan-building behaviours below were found unpinned by mutation
// testing (scripts/mutation.sh): each test is a suite a user could write
// and what Plans must make of it.

// A file with many broken cases lists its first 20 problems, in file
// order, and stops there: past that the rest are usually echoes.
func TestPlanListsTheFirstTwentyProblems(t *testing.T) {
	var src strings.Builder
	src.WriteString("cases:\n")
	for range 30 {
		src.WriteString("  - scenario: nope\n")
	}
	_, err := plans(t, src.String(), suite.Options{})
	var es suite.Errors
	if !errors.As(err, &es) {
		t.Fatalf("want suite.Errors, got %v", err)
	}
	if len(es) != 20 {
		t.Fatalf("%d problems listed, want the first 20 of 30", len(es))
	}
	for i, e := range es {
		if e.Line != i+2 {
			t.Fatalf("problem %d is at line %d, want %d (file order)", i, e.Line, i+2)
		}
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("%d problems in s.yaml", 20)) {
		t.Errorf("the message does not count the problems: %q", err.Error())
	}
}
