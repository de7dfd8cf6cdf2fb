// Package mysqlstore is racetest's MySQL and MariaDB backend (name "mysql"),
// built on github.com/go-sql-driver/mysql through database/sql.
//
// # Connecting
//
// --mysql-dsn or RACETEST_MYSQL_DSN takes the driver's DSN
// (user:password@tcp(host:3306)/database?params) or a URL
// (mysql://user:password@host:3306/database?params); empty means
// DefaultDSN, root@tcp(127.0.0.1:3306)/test. Whatever the string says,
// racetest sets parseTime=true, clientFoundRows=false (rows affected counts
// rows changed, which is what a conditional update decides on),
// interpolateParams=true (one round trip per statement, no hidden prepare)
// and a 3 s dial timeout unless timeout= is given. Every replica has its own
// pool sized to its workers; every worker holds one connection, dialled and
// pinged before the first burst. Parsing, redaction, error numbers and
// their classification are the one SQL layer's (internal/sqldb); passwords
// never appear in messages.
//
// Tables live in the database the DSN names, are called
// racetest_<run id>_<scenario>, are created with ENGINE=InnoDB (or --engine
// myisam or aria) and are dropped at the end of the run — only those. The
// report names the engine the server really used, read back from
// information_schema, and says when it ignores transactions (MyISAM, Aria).
// A replica process of 'run --processes' (serve --attached) creates no
// table: its target's Attach finds the tables of the run id it was given,
// fails when one is missing, and leaves dropping them to the parent.
// --isolation (read-uncommitted, read-committed, repeatable-read,
// serializable) is set on every worker's session with SET SESSION
// TRANSACTION ISOLATION LEVEL; the report names the level in force.
//
// # The scenarios' statements
//
// memory-set: each replica keeps the tokens it is processing in its own
// memory, behind a mutex; the action is
//
//	INSERT INTO racetest_<id>_memory_set (token, worker) VALUES (?, ?)
//
// and the effects are the rows with the burst's token.
//
// check-then-write: one transaction per attempt, the token's column has a
// non-unique index:
//
//	START TRANSACTION
//	SELECT id FROM racetest_<id>_check_then_write WHERE token = ? LIMIT 1   -- --variant for-update adds FOR UPDATE
//	-- if a row came back: "already done" (declined); otherwise, after --gap:
//	INSERT INTO racetest_<id>_check_then_write (token, worker) VALUES (?, ?)
//	COMMIT
//
// Only committed inserts count. Under REPEATABLE READ with FOR UPDATE, or
// under SERIALIZABLE, InnoDB's gap locks let one attempt commit and fail the
// rest with deadlock 1213, reported as "conflict"; under READ COMMITTED, or
// on MyISAM, FOR UPDATE on a row that does not exist yet protects nothing.
//
// conditional-update: each burst issues coupon id; each attempt runs
//
//	UPDATE racetest_<id>_conditional_update
//	   SET status = 'redeemed', redeemed_by = ?, redemptions = redemptions + 1
//	 WHERE id = ? AND status = 'issued'
//
// One row affected is the redemption, zero is "already redeemed". The
// effects are the redemptions column, which the UPDATE itself counts.
//
// unique-insert: UNIQUE(token), and
//
//	INSERT INTO racetest_<id>_unique_insert (token, worker) VALUES (?, ?)
//
// Only error 1062 (duplicate entry) is "already done"; any other error is
// counted as an error. --variant one-active has one active row per
// user: MySQL and MariaDB have no partial indexes, so a generated column
// holds user_id while the row is active and NULL otherwise, under a unique key
// (PERSISTENT on MariaDB, STORED on MySQL):
//
//	active_user BIGINT AS (IF(active = 1, user_id, NULL)) PERSISTENT, UNIQUE KEY (active_user)
//	INSERT INTO racetest_<id>_unique_insert_active (user_id, active, worker) VALUES (?, 1, ?)
//
// ttl-lease: the lease expires by the server's clock:
//
//	START TRANSACTION
//	UPDATE racetest_<id>_ttl_lease
//	   SET owner = ?, granted_at = NOW(6), lock_until = NOW(6) + INTERVAL <ttl µs> MICROSECOND, fence = fence + 1
//	 WHERE name = ? AND lock_until < NOW(6)
//	-- one row: granted, and recorded in the same transaction:
//	INSERT INTO racetest_<id>_ttl_lease_grants (name, owner, fence, granted_at, lock_until)
//	     SELECT name, owner, fence, granted_at, lock_until FROM racetest_<id>_ttl_lease WHERE name = ? AND owner = ?
//	COMMIT
//
// The holder never releases (it "dies"). The effects are the most recorded
// grants valid at one instant; a liveness check shows a dead holder's lease
// refused before the TTL and granted after it.
//
// # Errors
//
// Deadlocks (1213), MariaDB's snapshot check (1020) and SQLSTATE 40001 are
// conflicts; timeouts are unknown; everything else is an error. A refused
// connection is one line: "too many connections" names @@max_connections
// and what to change, a wrong password says so without showing it, an
// unknown database names it, an unreachable server fails within seconds.
//
// # For other scenarios
//
// Store (Open, CreateTable, AttachTable, EngineOf, OpenPool, Session,
// DropTables, Notes) is exported for scenarios built on this backend; the
// classifiers (sqldb.Classify, sqldb.ClassifyInsert) are the SQL layer's.
package mysqlstore
