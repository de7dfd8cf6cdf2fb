package mongostore

import (
	"context"
	"errors"
	"testing"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/racetest/racetest/runner"
)

// TestClassifyInsert: the server errors an insert can meet, and the one
// outcome each must give. Only the duplicate key is the guard's "already
// done".
func TestClassifyInsert(t *testing.T) {
	writeErr := func(code int) error {
		return mongo.WriteException{WriteErrors: []mongo.WriteError{{Code: code, Message: "injected by the test"}}}
	}
	for _, c := range []struct {
		name string
		err  error
		want runner.Class
	}{
		{"no error", nil, runner.Executed},
		{"E11000 duplicate key", writeErr(11000), runner.Declined},
		{"11001 duplicate key on update", writeErr(11001), runner.Declined},
		{"121 document failed validation", writeErr(121), runner.Error},
		{"238 NotImplemented", mongo.CommandError{Code: 238, Name: "NotImplemented"}, runner.Error},
		{"13 Unauthorized", mongo.CommandError{Code: 13, Name: "Unauthorized"}, runner.Error},
		{"write concern timeout", mongo.WriteException{WriteConcernError: &mongo.WriteConcernError{Code: 64}}, runner.Error},
		{"network error", mongo.CommandError{Code: 0, Labels: []string{"NetworkError"}, Wrapped: errors.New("connection reset")}, runner.Error},
		{"attempt deadline", context.DeadlineExceeded, runner.Unknown},
		{"cancelled", context.Canceled, runner.Error},
	} {
		if got := classifyInsert(c.err).Class; got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
