package suite

import (
	"net/url"
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
// that it can be shown in a listing or a report.
func Redact(conn string) string {
	if u, err := url.Parse(conn); err == nil && u.Scheme != "" && u.Host != "" {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), redacted)
		}
		conn = u.String()
		conn = strings.Replace(conn, ":"+url.QueryEscape(redacted)+"@", ":"+redacted+"@", 1)
	} else {
		conn = dsnPassword.ReplaceAllString(conn, "${1}:"+redacted+"@")
	}
	return kvPassword.ReplaceAllString(conn, "${1}"+redacted)
}
