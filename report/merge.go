package report

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Merge joins the JSON reports of a suite's shards ('racetest suite FILE
// --shard K/N --json part-K.json') into one report, their runs in the
// order given. names name the documents in errors. Each case must come
// from one shard: a run found twice, figure for figure (the same report
// given twice), is refused rather than counted twice. Matrix reports are
// laid out by the matrix that made them and are not merged.
func Merge(docs []Document, names []string) (Document, error) {
	if len(docs) == 0 {
		return Document{}, errors.New("nothing to merge: name the shards' JSON reports")
	}
	out := Document{Schema: docs[0].Schema, Version: docs[0].Version, Title: docs[0].Title}
	seen := map[string]string{} // a run's whole JSON → the report it came from
	for i, d := range docs {
		name := fmt.Sprintf("report %d", i+1)
		if i < len(names) {
			name = names[i]
		}
		if len(d.Matrix) > 0 {
			return Document{}, fmt.Errorf("%s is a matrix report: render it alone with 'racetest report %s'", name, name)
		}
		if d.Schema != out.Schema {
			return Document{}, fmt.Errorf("%s has schema %q, %s has %q: merge reports of one racetest", name, d.Schema, names[0], out.Schema)
		}
		if d.Title != out.Title {
			out.Title = ""
		}
		for _, r := range d.Runs {
			key, err := json.Marshal(r)
			if err != nil {
				return Document{}, fmt.Errorf("%s: run %s: %w", name, r.Name, err)
			}
			if first, ok := seen[string(key)]; ok {
				return Document{}, fmt.Errorf("%s holds run %q on %s exactly as %s does: the same report given twice? each case must come from one shard",
					name, r.Name, r.Backend, first)
			}
			seen[string(key)] = name
			out.Runs = append(out.Runs, r)
		}
	}
	return out, nil
}
