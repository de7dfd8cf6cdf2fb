// Package testlint holds checks over the repository's own test code: shapes
// that have leaked tables and keys on the shared servers before.
package testlint
