package redisstore

import (
	"context"
	"errors"
	"math/big"
	"strings"
	"testing"

	"github.com/racetest/racetest/runner"
)

func TestSnapshotNeedsAPattern(t *testing.T) {
	_, err := Snapshot(context.Background(), nil, nil)
	var se *runner.SnapshotError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "--watch") {
		t.Fatalf("no pattern: %v", err)
	}
}

func TestSnapshotAddNumber(t *testing.T) {
	sum := new(big.Rat)
	for _, v := range []string{"3", " 1.5 ", "abc", "", "-2"} {
		addNumber(sum, v)
	}
	if sum.Cmp(big.NewRat(5, 2)) != 0 {
		t.Errorf("sum %s, want 5/2", sum.RatString())
	}
}
