package suite

import (
	"fmt"
	"strings"

	"github.com/racetest/racetest/report"
)

// Resolve finishes a case that ran: when its server matches an on_server
// rule, that rule's expectation replaces the case's, and the reason joins
// the run's notes so that every report says why. Call it once per case.
func (p Plan) Resolve(c report.Case) report.Case {
	r := c.Result
	if r == nil || r.Server == "" {
		return c
	}
	server := strings.ToLower(r.Server)
	for _, rule := range p.OnServer {
		if strings.Contains(server, strings.ToLower(rule.Match)) {
			r.Notes = append(r.Notes, fmt.Sprintf("expectation on %s: %s instead of %s — %s",
				r.Server, rule.Expect, c.Expect, rule.Why))
			c.Expect = rule.Expect
			break
		}
	}
	return c
}
