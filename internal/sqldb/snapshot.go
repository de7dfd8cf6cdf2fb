package sqldb

import (
	"context"

	"github.com/racetest/racetest/internal/sqlsnap"
	"github.com/racetest/racetest/runner"
)

// SnapshotPlan is what a snapshot of a schema reads (package sqlsnap).
type SnapshotPlan = sqlsnap.SnapshotPlan

// snapshotLimits are the limits a plan applies (tests lower them).
var snapshotLimits = sqlsnap.DefaultLimits

// PlanSnapshot lists what a --effects auto snapshot of q's schema reads:
// every table of it, or those watch names (see sqlsnap).
func PlanSnapshot(ctx context.Context, d Dialect, q Querier, watch []string) (*SnapshotPlan, error) {
	return sqlsnap.Plan(ctx, d, snapQuerier{q}, watch, snapshotLimits)
}

// ReadSnapshot takes the snapshot p plans, on q.
func ReadSnapshot(ctx context.Context, p *SnapshotPlan, q Querier) (runner.Snapshot, error) {
	return p.Read(ctx, snapQuerier{q})
}

// snapQuerier runs sqlsnap's statements on a Querier.
type snapQuerier struct{ q Querier }

func (s snapQuerier) Rows(ctx context.Context, query string) ([][]any, error) {
	r, err := s.q.Query(ctx, query)
	return r.Values, err
}

func (s snapQuerier) Row(ctx context.Context, query string, dest ...any) error {
	return s.q.QueryRow(ctx, query).Scan(dest...)
}
