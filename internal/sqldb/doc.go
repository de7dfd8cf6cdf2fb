// Package sqldb is racetest's one SQL layer, for MySQL/MariaDB (through
// database/sql) and PostgreSQL (through pgx): what differs between the two,
// written once, for the backends, the incidents, the anomaly scenarios and
// the script interpreter.
//
// Connections:
//
//	db, err := sqldb.Open(ctx, sqldb.Postgres, url, sqldb.Options{Dial: p.Dial, Isolation: sqldb.Serializable})
//	defer db.Close()
//	db.Server()                           // "PostgreSQL 15.19", "MariaDB 10.11.19"
//	pool, conns, err := db.Warm(ctx, 16)  // 16 connections, dialled and checked now
//	defer pool.Close()                    // after closing each conn
//
// Statements and transactions: a Conn or Tx runs Exec, QueryRow and Query
// in the dialect's placeholders (Dialect.Rebind turns ? into $1 for
// PostgreSQL). InTx runs a function in a transaction at an isolation level.
// db.Exec and db.Count run racetest's own statements on its own connection,
// bounded by AdminTimeout.
//
// Errors: Classify and ClassifyInsert turn an error into a runner.Outcome
// (duplicate key → declined for an insert; deadlock and serialization
// failure → conflict; a timeout → unknown; anything else → error).
// IsDuplicate, IsConflict and IsTooManyConnections are the tests underneath.
// The server's codes are written once: mysql.go (1062, 1213, 1020, ...) and
// postgres.go (23505, 40001, 40P01, ...).
//
// Settings that change outcomes: db.Isolation (tx_isolation on MariaDB,
// transaction_isolation on MySQL 8), db.Setting (innodb_snapshot_isolation,
// default_transaction_isolation), MySQLEngineOf (a MyISAM table ignores
// transactions).
//
// Code that already holds a driver connection (the backends keep their own
// tuned pools) uses the same readers through Std and Pgx.
package sqldb
