package scenarios

import "time"

// The five built-in scenarios, from naive to safe. Backends register their
// implementations against these names.
const (
	MemorySet         = "memory-set"
	CheckThenWrite    = "check-then-write"
	ConditionalUpdate = "conditional-update"
	UniqueInsert      = "unique-insert"
	TTLLease          = "ttl-lease"
)

// The anomaly scenarios (package anomalies), whose outcome depends on the
// server, its isolation level and the locking the code asks for.
const (
	LostUpdate = "lost-update"
	WriteSkew  = "write-skew"
	JobQueue   = "job-queue"
)

// Variants of the anomaly scenarios; VariantNaive is each one's default.
const (
	VariantNaive        = "naive"
	VariantAtomic       = "atomic"
	VariantVersion      = "version"
	VariantMaterialized = "materialized"
	VariantSkipLocked   = "skip-locked"
	VariantConditional  = "conditional"
)

func always(e Expectation) func(Params) Expectation { return func(Params) Expectation { return e } }

// Core returns the specs of the five built-in scenarios in demo order.
func Core() []Spec {
	return []Spec{
		{
			Name:      MemorySet,
			Lesson:    "a lock in one process guards one process: R replicas run it up to R times",
			InProcess: "memory-set's check is in the replica's memory, not on the wire",
			Story: Story{
				Naive: `var processing = map[string]bool{}; var mu sync.Mutex
mu.Lock()
if processing[token] { mu.Unlock(); return "already done" }
processing[token] = true
mu.Unlock()
save(token)   // the guarded action`,
				Breaks: `The check and the mark are correctly locked — inside one process. Behind a load
balancer there are R replicas, each with its own map, so each lets one request through:
up to R saves. A deploy replaces the replicas with empty maps, so the same token
saves again after every restart.`,
				Fix: `Keep the "already done" mark where every replica sees it, and take it atomically:
a unique key (unique-insert), a compare-and-set (conditional-update), SET NX in Redis.`,
				Numbers: `With --replicas 1 it is SAFE: exactly one effect. With --replicas 3 the effects per
burst reach 3 (one per replica); with --waves 2 --deploy they grow again after the restart.`,
			},
			Expect: func(p Params) Expectation {
				if p.Replicas > 1 {
					return ExpectRace
				}
				return ExpectSafe
			},
			// The save takes 2ms, as a real one does: the attempts turned away in
			// memory arrive while it runs, so the bursts overlap on any backend.
			Demo: []DemoCase{{Label: "1 replica", Replicas: 1, Gap: 2 * time.Millisecond}, {Label: "3 replicas", Replicas: 3, Gap: 2 * time.Millisecond}},
		},
		{
			Name:   CheckThenWrite,
			Lesson: "read, then write if free: every attempt that reads before the first write gets through",
			Story: Story{
				Naive: `row := db.QueryRow("SELECT id FROM saves WHERE token = ?", token)
if row.Scan(&id) == sql.ErrNoRows {          // check
    db.Exec("INSERT INTO saves (token) VALUES (?)", token) // act
}`,
				Breaks: `Between the check and the write there is at least one round trip. Every attempt that
checks inside that window sees "free" and writes. Tested alone, with one click, the
window is never hit; with a double tap or two replicas it is hit every day.
SELECT ... FOR UPDATE on a row that does not exist yet locks nothing in PostgreSQL or
InnoDB READ COMMITTED.`,
				Fix: `Make the check and the write one atomic step that the store decides: a unique
constraint on token (unique-insert) or a conditional update (conditional-update).`,
				Numbers: `Effects per burst above 1, in most bursts. The timeline shows several "check" marks
before the first "act". --gap widens the window on purpose; even --gap 0 races.`,
			},
			Expect:   always(ExpectRace),
			Demo:     []DemoCase{{}},
			Variants: []string{VariantPlain, VariantForUpdate, VariantForShare, VariantAdvisoryLock},
		},
		{
			Name:   ConditionalUpdate,
			Lesson: "one atomic compare-and-set: exactly one attempt changes the row",
			Story: Story{
				Naive: `res := db.Exec("UPDATE coupons SET status='redeemed' WHERE id=? AND status='issued'", id)
if res.RowsAffected() == 1 { pay() } else { return "already redeemed" }`,
				Breaks: `It does not break: the store evaluates the condition and the change as one step, so
exactly one attempt sees "issued" and changes it; the rest change zero rows. The trap is
in the code around it: reading the status first and then updating unconditionally is
check-then-write again.`,
				Fix: `This is the fix. Equivalents: findOneAndUpdate with the status in the filter (MongoDB),
SET key value NX (Redis). Decide on rows affected, never on a prior read.`,
				Numbers: `Exactly 1 effect in every burst; the other attempts are "declined". A SAFE verdict is
only as strong as the overlap column: attempts that never overlapped prove nothing.`,
			},
			Expect: always(ExpectSafe),
			Demo:   []DemoCase{{}},
		},
		{
			Name:   UniqueInsert,
			Lesson: "insert and let a unique constraint refuse the rest: only the duplicate-key error means done",
			Story: Story{
				Naive: `_, err := db.Exec("INSERT INTO saves (token) VALUES (?)", token) // UNIQUE(token)
if isDuplicateKey(err) { return "already saved" }   // 1062 / 23505 / E11000
if err != nil { return err }                        // any other error is an error`,
				Breaks: `It does not break, as long as the constraint exists and only the duplicate-key error is
read as "already done". Swallowing every error as "already done" turns an outage into a
silent loss; for "one active per user" use a partial unique index.`,
				Fix: `This is the fix. On MySQL/MariaDB, "one active per user" needs a generated column with a
UNIQUE key, since there are no partial indexes.`,
				Numbers: `Exactly 1 effect per burst, N-1 declined. Any "error" outcome is a real failure and is
never counted as declined.`,
			},
			Expect: always(ExpectSafe),
			Demo:   []DemoCase{{}},
		},
		{
			Name:   TTLLease,
			Lesson: "take a lease that is free or expired: one holder at a time, and a dead holder frees it after the TTL",
			Story: Story{
				Naive: `ok := redis.SetNX(ctx, "lease:"+job, owner, ttl)   // or UPDATE ... WHERE lock_until < now()
if !ok { return "held by someone else" }
run(job)   // the holder may die here without releasing: the TTL frees the lease`,
				Breaks: `Taking the lease is atomic, so one holder at a time. Two traps remain: a holder that
pauses past the TTL (GC, a stopped process) wakes up and writes after the next holder
took over, and releasing with a plain DELETE removes the next holder's lease.`,
				Fix: `Fence the writes: each grant carries a token that increases, and the store refuses a
write with a token older than the last one it saw. Release with compare-and-delete.`,
				Numbers: `Exactly 1 holder per burst. The checks below the table show liveness: a lease whose
holder died is refused before the TTL and granted after it.`,
			},
			Expect: always(ExpectSafe),
			Demo:   []DemoCase{{}},
		},
	}
}
