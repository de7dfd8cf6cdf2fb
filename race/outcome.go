package race

import (
	"errors"

	"github.com/racetest/racetest/runner"
)

// Outcome is what became of one attempt, as the attempt saw it: executed,
// declined, conflict, error or unknown (runner's closed set of classes). The
// verdict never rests on it: it rests on Case.Effects, counted in the store.
type Outcome = runner.Outcome

// ErrDeclined marks a deliberate "no" from the guarded action: "already
// redeemed", "the lease is held". Wrap it, or return Declined, and From
// counts the attempt as declined rather than failed.
var ErrDeclined = errors.New("declined")

// Declined is an error for a deliberate "no", with the reason shown in the
// report. errors.Is(Declined(r), ErrDeclined) holds.
func Declined(reason string) error { return &declined{reason} }

type declined struct{ reason string }

func (d *declined) Error() string        { return "declined: " + d.reason }
func (d *declined) Is(target error) bool { return target == ErrDeclined }

// From maps what a Go function returned to an outcome:
//
//   - nil: executed (the function believes the action ran);
//   - ErrDeclined, Declined(...), or an error matching one of declined (your
//     own sentinel, such as ErrAlreadyRedeemed): declined;
//   - a context deadline: unknown, since the store may have applied the action
//     before the client gave up;
//   - anything else: error. An error is never taken for "already done".
//
// For a serialization failure or a deadlock, return runner.Retry(err).
func From(err error, declined ...error) Outcome {
	if err == nil {
		return runner.Done()
	}
	if errors.Is(err, ErrDeclined) {
		return runner.Refused(err)
	}
	for _, d := range declined {
		if d != nil && errors.Is(err, d) {
			return runner.Refused(err)
		}
	}
	return runner.Failed(err)
}
