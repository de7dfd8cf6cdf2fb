package scenarios

import (
	"context"
	"time"
)

// Sleep waits d (the run's --gap between check and act, a lease holder's
// pause), or until ctx ends. For sub-millisecond precision on the embedded
// store, see memstore.Wait.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
