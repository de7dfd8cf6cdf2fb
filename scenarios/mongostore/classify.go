package mongostore

import (
	"fmt"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/racetest/racetest/runner"
)

// This file is the backend's outcome classification, apart from the calls
// that meet the errors, so that mutation testing (scripts/mutation.sh)
// measures it alone. Its decisions are ifs, not a switch: gremlins never
// mutates a switch's case expressions.

// classifyInsert maps an insert's error to an outcome: the duplicate-key
// error (11000) is the guard's "already done"; every other error stays an
// error (an attempt's deadline makes it unknown: see runner.Failed).
func classifyInsert(err error) runner.Outcome {
	if err == nil {
		return runner.Done()
	}
	if mongo.IsDuplicateKeyError(err) {
		return runner.Refused(err)
	}
	return runner.Failed(fmt.Errorf("mongo: insertOne: %w", err))
}
