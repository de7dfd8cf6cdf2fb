package mongodb

import (
	"errors"
	"testing"
)

// Only reads pass: find, count, distinct, and an aggregate without $out or
// $merge (nested ones too); every other command is refused before it is
// sent. No server: the rule is the command's text.
func TestCheckRead(t *testing.T) {
	for _, c := range []string{
		`{"find": "acct", "filter": {"balance": {"$lt": 0}}}`,
		`{"count": "acct", "query": {"balance": {"$lt": 0}}}`,
		`{"distinct": "acct", "key": "owner"}`,
		`{"aggregate": "acct", "pipeline": [{"$match": {"balance": {"$lt": 0}}}, {"$count": "n"}], "cursor": {}}`,
		`{"aggregate": "acct", "pipeline": [{"$match": {"note": "$out"}}], "cursor": {}}`,
	} {
		if err := CheckReadJSON(c); err != nil {
			t.Errorf("%s refused: %v", c, err)
		}
	}
	for _, c := range []string{
		`{"delete": "acct", "deletes": [{"q": {}, "limit": 0}]}`,
		`{"update": "acct", "updates": [{"q": {}, "u": {"$inc": {"balance": 100}}}]}`,
		`{"insert": "acct", "documents": [{"balance": 1}]}`,
		`{"drop": "acct"}`,
		`{"dropDatabase": 1}`,
		`{"findAndModify": "acct", "query": {}, "remove": true}`,
		`{"findandmodify": "acct", "query": {}, "update": {"$set": {"balance": 0}}}`,
		`{"create": "acct2"}`,
		`{"eval": "db.acct.remove({})"}`,
		`{"aggregate": "acct", "pipeline": [{"$match": {}}, {"$out": "copy"}], "cursor": {}}`,
		`{"aggregate": "acct", "pipeline": [{"$merge": {"into": "copy"}}], "cursor": {}}`,
		`{"aggregate": "acct", "pipeline": [{"$facet": {"a": [{"$out": "copy"}]}}], "cursor": {}}`,
	} {
		var we *WriteError
		if err := CheckReadJSON(c); !errors.As(err, &we) {
			t.Errorf("%s: %v, want it refused", c, err)
		}
	}
}
