package httpfire

import (
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"github.com/racetest/racetest/internal/printable"
	"github.com/racetest/racetest/runner"
)

// rules is a compiled Success.
type rules struct {
	codes   map[int]bool
	classes map[int]bool // 2 for "2xx"
	body    *regexp.Regexp
	desc    string
	// declined, when set, are the only statuses that mean "already done".
	declined *rules
}

func compileRules(s Success) (rules, error) {
	r, err := compileStatuses(s.Status, "success")
	if err != nil {
		return r, err
	}
	if len(s.Declined) > 0 {
		d, err := compileStatuses(s.Declined, "declined")
		if err != nil {
			return r, err
		}
		r.declined = &d
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

// compileStatuses reads codes ("200,201") and classes ("2xx").
func compileStatuses(list []string, field string) (rules, error) {
	r := rules{codes: map[int]bool{}, classes: map[int]bool{}}
	for _, raw := range list {
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
					return r, inputErrorf(field, "%q is not a status code (want e.g. 200,201 or 2xx)", code)
				}
				r.codes[n] = true
			}
		}
	}
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

// rejected are the 4xx statuses that refuse the request itself — its
// address, its credentials, its method, its rate — rather than the guarded
// action: a typo'd path (404) or an expired token (401) is not "already
// done", and a run of them tested nothing.
var rejected = map[int]bool{
	401: true, 403: true, 404: true, 405: true, 406: true, 407: true, 408: true, 411: true,
	413: true, 414: true, 415: true, 421: true, 426: true, 429: true, 431: true,
}

// rejectedError is a response that refused the request itself.
type rejectedError struct{ status int }

func (e *rejectedError) Error() string {
	return fmt.Sprintf("HTTP %d %s (the request was refused, not the action)", e.status, http.StatusText(e.status))
}

// classify turns one response into the attempt's outcome: success by the
// rule; a 5xx that is not success is an error (the server failed, and may
// have done part of the work); a 4xx that refuses the request itself (404,
// 401, 429, …) is an error too, never "already done"; any other response is
// the server saying no (409, 410, 422, …).
func (r rules) classify(status int, body []byte) runner.Outcome {
	if r.statusOK(status) && (r.body == nil || r.body.Match(body)) {
		return runner.Done()
	}
	err := fmt.Errorf("HTTP %d %s", status, http.StatusText(status))
	if status >= 500 {
		// The body's first line says why the server failed ("pool
		// exhausted", "deadlock detected"): the report shows it.
		if line := firstLine(body); line != "" {
			err = fmt.Errorf("HTTP %d %s: %s", status, http.StatusText(status), line)
		}
		return runner.Outcome{Class: runner.Error, Err: err}
	}
	if d := r.declined; d != nil {
		if d.codes[status] || d.classes[status/100] {
			return runner.Refused(err)
		}
		return runner.Outcome{Class: runner.Error, Err: &rejectedError{status}}
	}
	if rejected[status] && !r.statusOK(status) {
		return runner.Outcome{Class: runner.Error, Err: &rejectedError{status}}
	}
	if r.statusOK(status) {
		err = fmt.Errorf("HTTP %d, body does not match /%s/", status, r.body)
	}
	return runner.Refused(err)
}

// firstLine is the first non-blank line of a response body, printable and
// cut to 100 characters, for an error's text.
func firstLine(body []byte) string {
	for _, l := range strings.Split(string(body), "\n") {
		if l = printable.Line(strings.TrimSpace(l)); l != "" {
			if r := []rune(l); len(r) > 100 {
				l = string(r[:100]) + "…"
			}
			return l
		}
	}
	return ""
}
