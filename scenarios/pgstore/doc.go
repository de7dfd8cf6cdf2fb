// Package pgstore is racetest's PostgreSQL backend ("postgres"), built on
// pgx v5. It runs the five core scenarios with the statements below, in
// tables named racetest_<run id>_… in the connection's default schema, which
// it creates before the run and drops after it (also after Ctrl-C; --keep
// leaves them). Nothing else in the database is read, changed or dropped.
//
// # Connecting
//
// --postgres-url or RACETEST_POSTGRES_URL takes a postgres:// URL or
// keyword=value pairs; the default is DefaultURL
// (postgres://postgres@127.0.0.1:5432/test?sslmode=disable). Every worker
// gets its own connection, dialled and checked before the first burst, plus
// one connection of racetest's own for setup and counting: N attempts need
// N+1 connections. When the server refuses one (SQLSTATE 53300), the run
// stops with one line naming max_connections (minus
// superuser_reserved_connections for a user who is not a superuser) and how
// many attempts fit. Connecting gives up after 3 s unless the URL sets
// connect_timeout. Passwords never appear in messages.
//
// Statements go out with pgx's QueryExecModeExec: each is one write and one
// round trip (Parse, Bind, Describe, Execute and Sync in one buffer), with
// no hidden prepare round trip the first time a statement is used.
//
// --isolation read-committed|repeatable-read|serializable sets
// default_transaction_isolation on every connection (in the startup message,
// at no cost in round trips); the report notes the level in force. Without
// it, the server's default applies (read committed unless configured).
//
// # Scenarios
//
// memory-set — each replica keeps its "processing" set in its own memory,
// correctly locked; the worker that marks it first writes
//
//	INSERT INTO effects (k, worker, replica) VALUES ($1, $2, $3)
//
// Effects: SELECT count(*) FROM effects WHERE k = $1.
//
// check-then-write — in one transaction, a real read and then a real write;
// BEGIN and the SELECT are sent together, so the snapshot starts at the read:
//
//	BEGIN [ISOLATION LEVEL …]; SELECT id FROM effects WHERE k = $1 LIMIT 1 [FOR UPDATE]
//	-- no row: (--gap), then
//	INSERT INTO effects (k, worker, replica) VALUES ($1, $2, $3); COMMIT
//
// Variant "for-update" adds FOR UPDATE, which locks nothing while the row
// does not exist yet: it races like the plain read. Under SERIALIZABLE one
// attempt commits and the others fail with 40001 — at the INSERT or at
// COMMIT — counted as "conflict"; only a confirmed COMMIT counts as executed.
// Effects: rows for k, as for memory-set.
//
// conditional-update — one compare-and-set on a coupon issued before the burst:
//
//	UPDATE coupons SET status = 'redeemed', redeemed_by = $2, redemptions = redemptions + 1
//	WHERE id = $1 AND status = 'issued' RETURNING id
//
// A row back: executed; none: declined. Under READ COMMITTED the losers
// re-check the WHERE clause on the winner's row version and match nothing;
// under REPEATABLE READ or SERIALIZABLE they fail with 40001 (conflict).
// Effects: the redemptions counter the statement itself increments.
//
// unique-insert — INSERT INTO saves (token, worker, replica) VALUES (…) with
// token the primary key. Only SQLSTATE 23505 (unique_violation) is
// "declined"; 40001/40P01 are "conflict"; every other error is an "error".
// Variant "one-active" is "one active sanction per user": a partial unique
// index
//
//	CREATE UNIQUE INDEX … ON sanctions (user_id) WHERE active
//	INSERT INTO sanctions (user_id, active, worker) VALUES ($1, true, $2)
//
// where each user starts with a deactivated sanction that must not block the
// new one. Effects: rows for the token, or active rows for the user.
//
// ttl-lease — take a lease that is free or expired, by the server's clock,
// and record the grant in the same statement:
//
//	WITH taken AS (
//	  UPDATE locks SET owner = $1, lock_until = clock_timestamp() + $2::interval, fence = fence + 1
//	  WHERE name = $3 AND lock_until < clock_timestamp()
//	  RETURNING name, owner, fence, lock_until)
//	INSERT INTO grants (name, owner, fence, granted_at, lock_until)
//	SELECT name, owner, fence, lock_until - $2::interval, lock_until FROM taken
//
// clock_timestamp(), not now(): now() is the start of the transaction.
// Effects: the most grants valid at one instant. A liveness check takes a
// lease for a holder that "dies", is refused before the TTL and granted after
// it, judged by the server's timestamps.
package pgstore
