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
