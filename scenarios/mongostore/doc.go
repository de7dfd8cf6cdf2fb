// Package mongostore is the MongoDB backend (mongo-driver v2): the five core
// scenarios on one database of a MongoDB server, or of a wire-compatible one
// such as FerretDB, which it detects and names.
package mongostore
