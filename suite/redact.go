package suite

import (
	"regexp"
	"strings"
)

// redacted replaces a password wherever a connection string can hold one.
const redacted = "xxxxx"

var (
	// user:password@ in a driver DSN ("root:secret@tcp(db:3306)/test").
	dsnPassword = regexp.MustCompile(`^([^:@/]*):[^@]*@`)
	// password=… in key=value DSNs and URL queries.
	kvPassword = regexp.MustCompile(`(?i)((?:password|passwd|pwd|sslpassword)=)[^&\s]*`)
)

// Redact hides the password of a connection string (URL or driver DSN) so
// that it can be shown in a listing or a report. Everything else is kept
// as written: a URL is not re-encoded, so templates stay readable.
func Redact(conn string) string {
	if i := strings.Index(conn, "://"); i >= 0 {
		rest := conn[i+3:]
		end := strings.IndexAny(rest, "/?#")
		if end < 0 {
			end = len(rest)
		}
		authority := rest[:end]
		if at := strings.LastIndexByte(authority, '@'); at >= 0 {
			if colon := strings.IndexByte(authority[:at], ':'); colon >= 0 {
				conn = conn[:i+3] + authority[:colon] + ":" + redacted + authority[at:] + rest[end:]
			}
		}
	} else {
		conn = dsnPassword.ReplaceAllString(conn, "${1}:"+redacted+"@")
	}
	return kvPassword.ReplaceAllString(conn, "${1}"+redacted)
}

// secretInText finds passwords anywhere in a line of text (a suite's
// source line, a message): URL userinfo, a driver DSN's user:password@,
// and password=… pairs. The password is the first submatch.
var secretInText = []*regexp.Regexp{
	regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@'"]*:([^@\s'"]*)@`),
	regexp.MustCompile(`[A-Za-z0-9_.$-]*:([^@\s'"]*)@(?:[a-z]+\(|/)`),
	regexp.MustCompile(`(?i)\b(?:password|passwd|pwd|sslpassword)\s*=\s*('(?:[^'\\]|\\.)*'|[^\s&'"]*)`),
}

// redactText hides every password in s, and moves byte offset at (a
// column to point at) so that it still points at the same text, or at the
// redaction that replaced what it pointed into.
func redactText(s string, at int) (string, int) {
	for _, re := range secretInText {
		var b strings.Builder
		last, moved := 0, at
		for _, m := range re.FindAllStringSubmatchIndex(s, -1) {
			start, end := m[2], m[3]
			if start < 0 || end == start || s[start:end] == redacted {
				continue
			}
			b.WriteString(s[last:start])
			b.WriteString(redacted)
			switch {
			case at >= end:
				moved += len(redacted) - (end - start)
			case at >= start:
				moved = b.Len() - len(redacted)
			}
			last = end
		}
		if last > 0 {
			b.WriteString(s[last:])
			s, at = b.String(), moved
		}
	}
	return s, at
}
