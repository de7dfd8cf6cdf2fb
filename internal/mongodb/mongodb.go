// Package mongodb is what every part of racetest that talks to MongoDB (or
// FerretDB) shares, whichever part opens the client (the mongo backend,
// scripts, HTTP effects): the default address and database, how a URI is
// shown without its secrets, and which server answers. It is beside
// internal/sqldb, and like it holds no scenario.
package mongodb

import (
	"context"
	"fmt"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// DefaultURI is the server a run uses when no --mongo-uri or
// RACETEST_MONGO_URI is given: the standard local port, one server, no
// replica-set discovery (so a single-node replica set in docker, whose member
// names only resolve inside docker, still answers).
const DefaultURI = "mongodb://127.0.0.1:27017/?directConnection=true"

// DefaultDatabase holds the run's collections when the URI names no database.
const DefaultDatabase = "racetest"

// Redact returns uri with its password (and any query parameter that carries
// a secret) replaced by "xxxxx", for errors and reports.
func Redact(uri string) string {
	scheme, rest, ok := strings.Cut(uri, "://")
	if !ok {
		return redactQuery(uri)
	}
	// The user info ends at the last '@' before the path: a password may
	// itself contain '@' or '/' when it was not percent-encoded.
	hostEnd := len(rest)
	if i := strings.LastIndex(rest, "@"); i >= 0 {
		if j := strings.IndexAny(rest[i:], "/?"); j >= 0 {
			hostEnd = i + j
		}
	} else if j := strings.IndexAny(rest, "/?"); j >= 0 {
		hostEnd = j
	}
	authority, tail := rest[:hostEnd], rest[hostEnd:]
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		user := authority[:at]
		if name, _, hasPw := strings.Cut(user, ":"); hasPw {
			authority = name + ":xxxxx" + authority[at:]
		}
	}
	return scheme + "://" + authority + redactQuery(tail)
}

// redactQuery hides the values of query parameters that carry secrets
// (tlsCertificateKeyFilePassword, authMechanismProperties with an AWS session
// token).
func redactQuery(s string) string {
	path, query, ok := strings.Cut(s, "?")
	if !ok {
		return s
	}
	parts := strings.Split(query, "&")
	for i, kv := range parts {
		k, _, _ := strings.Cut(kv, "=")
		lk := strings.ToLower(k)
		if strings.Contains(lk, "password") || strings.Contains(lk, "secret") ||
			strings.Contains(lk, "token") || lk == "authmechanismproperties" {
			parts[i] = k + "=xxxxx"
		}
	}
	return path + "?" + strings.Join(parts, "&")
}

// ServerInfo is what BuildInfo says about the server.
type ServerInfo struct {
	// Version is the MongoDB version the server reports (on FerretDB, the
	// MongoDB version whose wire protocol it speaks).
	Version string
	// FerretDBVersion is set when the server is FerretDB ("unknown" when an
	// embedded FerretDB could not tell its own version).
	FerretDBVersion string
}

// FerretDB reports whether the server is FerretDB, whose findAndModify and
// conditional updates are not atomic (see doc.go).
func (s ServerInfo) FerretDB() bool { return s.FerretDBVersion != "" }

// String names the server as a report shows it: "MongoDB 7.0.14" or
// "FerretDB 1.24.2 (MongoDB 7.0.42 wire)".
func (s ServerInfo) String() string {
	if s.FerretDB() {
		v := strings.TrimPrefix(s.FerretDBVersion, "v")
		if v == "unknown" {
			v = "(version unknown)"
		}
		return fmt.Sprintf("FerretDB %s (MongoDB %s wire)", v, s.Version)
	}
	return "MongoDB " + s.Version
}

// BuildInfo asks the server behind db which server it is.
func BuildInfo(ctx context.Context, db *mongo.Database) (ServerInfo, error) {
	var doc struct {
		Version         string `bson:"version"`
		FerretDBVersion string `bson:"ferretdbVersion"`
	}
	if err := db.RunCommand(ctx, bson.D{{Key: "buildInfo", Value: 1}}).Decode(&doc); err != nil {
		return ServerInfo{}, fmt.Errorf("mongo: buildInfo: %w", err)
	}
	return ServerInfo{Version: doc.Version, FerretDBVersion: doc.FerretDBVersion}, nil
}
