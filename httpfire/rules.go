package httpfire

import (
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"github.com/racetest/racetest/runner"
)

// rules is a compiled Success.
type rules struct {
	codes   map[int]bool
	classes map[int]bool // 2 for "2xx"
	body    *regexp.Regexp
	desc    string
}

func compileRules(s Success) (rules, error) {
	r := rules{codes: map[int]bool{}, classes: map[int]bool{}}
	for _, raw := range s.Status {
		for _, code := range strings.Split(raw, ",") {
			code = strings.ToLower(strings.TrimSpace(code))
			switch {
			case code == "":
				continue
			case len(code) == 3 && strings.HasSuffix(code, "xx") && code[0] >= '1' && code[0] <= '5':
				r.classes[int(code[0]-'0')] = true
			default:
				n, err := strconv.Atoi(code)
				if err != nil || n < 100 || n > 599 {
					return r, inputErrorf("success", "%q is not a status code (want e.g. 200,201 or 2xx)", code)
				}
				r.codes[n] = true
			}
		}
	}
	if s.Body != "" {
		re, err := regexp.Compile(s.Body)
		if err != nil {
			return r, inputErrorf("success-body", "bad regular expression: %w", err)
		}
		r.body = re
	}
	if len(r.codes) == 0 && len(r.classes) == 0 && r.body == nil {
		r.classes[2] = true
	}
	r.desc = r.describe(s)
	return r, nil
}

func (r rules) describe(s Success) string {
	var parts []string
	if len(r.codes) > 0 || len(r.classes) > 0 {
		st := strings.Join(s.Status, ",")
		if st == "" {
			st = "2xx"
		}
		parts = append(parts, "status "+st)
	}
	if r.body != nil {
		parts = append(parts, "body matches /"+r.body.String()+"/")
	}
	return strings.Join(parts, " and ")
}

func (r rules) statusOK(code int) bool {
	if len(r.codes) == 0 && len(r.classes) == 0 {
		return true
	}
	return r.codes[code] || r.classes[code/100]
}

// classify turns one response into the attempt's outcome: success by the
// rule; a 5xx that is not success is an error (the server failed, and may
// have done part of the work); anything else is the server saying no.
func (r rules) classify(status int, body []byte) runner.Outcome {
	if r.statusOK(status) && (r.body == nil || r.body.Match(body)) {
		return runner.Done()
	}
	err := fmt.Errorf("HTTP %d %s", status, http.StatusText(status))
	if status >= 500 {
		return runner.Outcome{Class: runner.Error, Err: err}
	}
	if r.statusOK(status) {
		err = fmt.Errorf("HTTP %d, body does not match /%s/", status, r.body)
	}
	return runner.Refused(err)
}
