package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Merge joins the JSON reports of a suite's shards ('racetest suite FILE
// --shard K/N --json part-K.json') into one report, their runs in the
// order given. names name the documents in errors. Each case must come
// from one shard: a run found twice, figure for figure (the same report
// given twice), is refused rather than counted twice. Matrix reports are
// laid out by the matrix that made them and are not merged.
//
// Reports that say which part they are (Shard) must be every part of one
// suite run, each once and each whole: a CI job that died before writing
// its part would otherwise leave a merged report, and its exit code, that
// never ran that part's cases. Reports that do not say (an older racetest's)
// are merged as given.
func Merge(docs []Document, names []string) (Document, error) {
	if len(docs) == 0 {
		return Document{}, errors.New("nothing to merge: name the shards' JSON reports")
	}
	if err := wholeSet(docs, names); err != nil {
		return Document{}, err
	}
	out := Document{Schema: docs[0].Schema, Version: docs[0].Version, Title: docs[0].Title}
	seen := map[string]string{} // a run's whole JSON → the report it came from
	for i, d := range docs {
		name := docName(names, i)
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

// wholeSet checks that docs are parts 1 to N of one sharded suite run,
// each once and each with all its cases, when any of them says it is a
// part.
func wholeSet(docs []Document, names []string) error {
	name := func(i int) string { return docName(names, i) }
	first := -1
	for i, d := range docs {
		if d.Shard != nil {
			first = i
			break
		}
	}
	if first < 0 {
		return nil
	}
	s0 := docs[first].Shard
	part := map[int]string{}
	for i, d := range docs {
		s := d.Shard
		// Ifs, not a switch: gremlins v0.6.0 never mutates a switch's case
		// expressions, and these decide whether the merge stands.
		if s == nil {
			return fmt.Errorf("%s is not a part of a sharded suite run, %s is (shard %d/%d of %s): merge the parts of one 'racetest suite --shard K/N' run",
				name(i), name(first), s0.K, s0.N, s0.Suite)
		}
		if s.Digest != s0.Digest || s.N != s0.N {
			return fmt.Errorf("%s is shard %d/%d of %s, %s is shard %d/%d of %s: not parts of one suite run (the same suite file, split in as many parts)",
				name(i), s.K, s.N, s.Suite, name(first), s0.K, s0.N, s0.Suite)
		}
		if s.K < 1 || s.K > s.N {
			return fmt.Errorf("%s says it is shard %d/%d: not a part", name(i), s.K, s.N)
		}
		if part[s.K] != "" {
			return fmt.Errorf("%s and %s are both shard %d/%d of %s: give each part's report once", part[s.K], name(i), s.K, s.N, s.Suite)
		}
		if len(d.Runs) < s.Cases {
			return fmt.Errorf("%s holds %d of the %d cases of shard %d/%d of %s: that part did not finish (interrupted, or it timed out); run it again",
				name(i), len(d.Runs), s.Cases, s.K, s.N, s.Suite)
		}
		part[s.K] = name(i)
	}
	var missing []string
	for k := 1; k <= s0.N; k++ {
		if part[k] == "" {
			missing = append(missing, fmt.Sprintf("%d/%d", k, s0.N))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	which, are, them, their := "shard "+missing[0], "is", "it", "its"
	if len(missing) > 1 {
		which, are, them, their = "shards "+strings.Join(missing, ", "), "are", "them", "their"
	}
	return fmt.Errorf("%s of %s %s missing (%d of %d parts given): a merged report without %s would not have run %s cases; give every part's report",
		which, s0.Suite, are, len(part), s0.N, them, their)
}

// docName is the i-th report as errors name it: its file, or "report 2"
// where no name was given.
func docName(names []string, i int) string {
	if i < len(names) {
		return names[i]
	}
	return fmt.Sprintf("report %d", i+1)
}
