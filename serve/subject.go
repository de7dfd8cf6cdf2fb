package serve

import (
	"encoding/json"
	"fmt"

	"github.com/racetest/racetest/runner"
)

// SubjectJSON carries a burst's subject from the process that made it to
// the replicas that attempt it.
type SubjectJSON struct {
	Burst int       `json:"burst"`
	Key   string    `json:"key"`
	Data  *DataJSON `json:"data,omitempty"`
}

// DataJSON is a subject's data with its Go type, so that a replica gets back
// exactly the value the scenario put there. Kind "opaque" is data no plain
// value can carry; a replica makes such a subject again with its own Reset.
type DataJSON struct {
	Kind  string          `json:"kind"`
	Value json.RawMessage `json:"value,omitempty"`
}

// EncodeSubject turns s into JSON.
func EncodeSubject(s runner.Subject) SubjectJSON {
	j := SubjectJSON{Burst: s.Burst, Key: s.Key}
	if s.Data == nil {
		return j
	}
	kind := ""
	switch s.Data.(type) {
	case int:
		kind = "int"
	case int64:
		kind = "int64"
	case int32:
		kind = "int32"
	case uint64:
		kind = "uint64"
	case string:
		kind = "string"
	case float64:
		kind = "float64"
	case bool:
		kind = "bool"
	default:
		return SubjectJSON{Burst: s.Burst, Key: s.Key, Data: &DataJSON{Kind: "opaque"}}
	}
	v, err := json.Marshal(s.Data)
	if err != nil {
		return SubjectJSON{Burst: s.Burst, Key: s.Key, Data: &DataJSON{Kind: "opaque"}}
	}
	j.Data = &DataJSON{Kind: kind, Value: v}
	return j
}

// Decode turns j back into a subject. opaque reports data no plain value
// carried: the replica must make the subject itself.
func (j SubjectJSON) Decode() (s runner.Subject, opaque bool, err error) {
	s = runner.Subject{Burst: j.Burst, Key: j.Key}
	if j.Data == nil {
		return s, false, nil
	}
	switch j.Data.Kind {
	case "int":
		s.Data, err = decode[int](j.Data.Value)
	case "int64":
		s.Data, err = decode[int64](j.Data.Value)
	case "int32":
		s.Data, err = decode[int32](j.Data.Value)
	case "uint64":
		s.Data, err = decode[uint64](j.Data.Value)
	case "string":
		s.Data, err = decode[string](j.Data.Value)
	case "float64":
		s.Data, err = decode[float64](j.Data.Value)
	case "bool":
		s.Data, err = decode[bool](j.Data.Value)
	case "opaque":
		return s, true, nil
	default:
		return s, false, fmt.Errorf("unknown subject data kind %q", j.Data.Kind)
	}
	if err != nil {
		return s, false, fmt.Errorf("subject data of kind %s: %w", j.Data.Kind, err)
	}
	return s, false, nil
}

func decode[T any](raw json.RawMessage) (T, error) {
	var v T
	err := json.Unmarshal(raw, &v)
	return v, err
}
