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

// CleanupTimeout bounds the dropping of a run's objects. It is short on
// purpose: a cleanup runs after Ctrl-C, while the user waits.
const CleanupTimeout = 15 * time.Second

// CleanupContext is the context a cleanup runs under: never cancelled by
// ctx (Ctrl-C must not stop the dropping of what the run made), but with a
// deadline of its own, so that a server that stopped answering cannot hold
// the process forever.
func CleanupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), CleanupTimeout)
}
