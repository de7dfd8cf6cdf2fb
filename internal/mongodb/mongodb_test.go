package mongodb_test

import (
	"strings"
	"testing"

	"github.com/racetest/racetest/internal/mongodb"
)

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		mongodb.DefaultURI:                                           mongodb.DefaultURI,
		"mongodb://u:pw@h:27017/db":                                  "mongodb://u:xxxxx@h:27017/db",
		"mongodb://u:p@ss/w:rd@h1:1,h2:2/db?replicaSet=rs":           "mongodb://u:xxxxx@h1:1,h2:2/db?replicaSet=rs",
		"mongodb+srv://u:pw@cluster.example.com/?retryWrites=true":   "mongodb+srv://u:xxxxx@cluster.example.com/?retryWrites=true",
		"mongodb://u@h/?authMechanism=MONGODB-X509":                  "mongodb://u@h/?authMechanism=MONGODB-X509",
		"mongodb://h/?tlsCertificateKeyFilePassword=pw&tls=true":     "mongodb://h/?tlsCertificateKeyFilePassword=xxxxx&tls=true",
		"mongodb://h/?authMechanismProperties=AWS_SESSION_TOKEN:tok": "mongodb://h/?authMechanismProperties=xxxxx",
	} {
		if got := mongodb.Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestServerName(t *testing.T) {
	for _, c := range []struct {
		info mongodb.ServerInfo
		want string
	}{
		{mongodb.ServerInfo{Version: "7.0.14"}, "MongoDB 7.0.14"},
		{mongodb.ServerInfo{Version: "7.0.42", FerretDBVersion: "v1.24.2"}, "FerretDB 1.24.2 (MongoDB 7.0.42 wire)"},
		{mongodb.ServerInfo{Version: "7.0.42", FerretDBVersion: "unknown"}, "FerretDB (version unknown) (MongoDB 7.0.42 wire)"},
	} {
		if got := c.info.String(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.info, got, c.want)
		}
		if c.info.FerretDB() != strings.HasPrefix(c.want, "FerretDB") {
			t.Errorf("%+v: FerretDB() = %v", c.info, c.info.FerretDB())
		}
	}
}
