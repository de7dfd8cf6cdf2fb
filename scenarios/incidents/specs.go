package incidents

import (
	"slices"

	"github.com/racetest/racetest/scenarios"
)

// Variants of the incident scenarios (--variant). The first of each list is
// the default.
const (
	Naive = "naive"
	Fixed = "fixed"

	// alert-dedupe
	FailOpen     = "fail-open"      // the store is down (a dead port)
	FailOpenHang = "fail-open-hang" // the store accepts and never answers
	P0           = "p0"             // the most severe class bypasses the shared dedupe

	// job-window
	StoreDown = "store-down"

	// reward-payout
	CheckThenPay       = "check-then-pay"
	RecordThenPay      = "record-then-pay"
	UniqueRecord       = "unique"
	SwallowErrors      = "swallow-errors"
	OneTransaction     = "tx"
	External           = "external"
	ExternalIdempotent = "external-idempotent"

	// lease-pause
	Fenced = "fenced"
)

var (
	alertVariants = variants{Naive, Fixed, FailOpen, FailOpenHang, P0}
	jobVariants   = variants{Naive, Fixed, StoreDown}
	leaseVariants = variants{Naive, Fenced}
)

// Specs returns the incident scenarios' specs in demo order.
func Specs() []scenarios.Spec {
	return []scenarios.Spec{alertSpec(), jobSpec(), rewardSpec(), leaseSpec(), replicaReadSpec(), failoverSpec()}
}

// raceFor expects a race for the variants listed (the first is the
// scenario's default) and SAFE for the others.
func raceFor(races ...string) func(scenarios.Params) scenarios.Expectation {
	return func(p scenarios.Params) scenarios.Expectation {
		v := p.Variant
		if v == "" {
			v = races[0]
		}
		if slices.Contains(races, v) {
			return scenarios.ExpectRace
		}
		return scenarios.ExpectSafe
	}
}

// perReplica is the expectation of a "once per window" scenario whose naive
// variant remembers in each replica's memory: with one replica that memory
// is the one shared table and it holds — until a deploy, which an
// expectation cannot see (it is given Params, not the run's waves).
func perReplica(p scenarios.Params) scenarios.Expectation {
	if (p.Variant == "" || p.Variant == Naive) && p.Replicas > 1 {
		return scenarios.ExpectRace
	}
	return scenarios.ExpectSafe
}

func alertSpec() scenarios.Spec {
	return scenarios.Spec{
		Name:   AlertDedupe,
		Lesson: "an alert deduped in each replica's memory is sent once per replica and again after every deploy; claim it in the shared store",
		Story: scenarios.Story{
			Naive: `var sent = map[string]time.Time{}   // per replica, locked
if t, ok := sent[key]; ok && time.Since(t) < 24*time.Hour { return }
sent[key] = time.Now()
notify("credits low for app X")
// and, when the map reaches 500 keys, delete every entry older than 15 minutes`,
			Breaks: `Each API replica keeps its own map, so with R replicas the alert goes out R times, and a
deploy (replicas replaced, memory empty) sends it again. Quieter: the prune at 500 keys
deleted every entry older than 15 minutes whatever its window, so under load a 24 h
dedupe shrank to about 15 minutes.`,
			Fix: `Before sending, claim the key where every replica sees it, in one atomic step that also
sets the expiry: SET alert:<key> 1 NX PX 86400000. Only the claimer sends; a freshly
started replica finds the claim. The replica's own map may stay as a first filter, pruned
by each entry's own expiry. Policy choices, on purpose:
  - fail open: if the store is down or does not answer within 1.5 s, send anyway — a
    duplicate is noise, a missed alert is worse (variants fail-open, fail-open-hang);
  - P0 alerts skip the shared claim and are sent by every replica (variant p0).
A claim only the primary acknowledged is lost when Redis fails over, and the alert goes
out twice: 'racetest explain failover-lock' (variants alert-claim, alert-claim-wait).`,
			Numbers: `naive with 3 replicas and --waves 2 --deploy: 3 sends per wave, 6 per alert. fixed: exactly
1. fail-open: one send per replica, all counted as allowed by policy (see the note), and
each burst lasts the 1.5 s deadline when the store hangs — not the driver's 5 s default.
p0: allowed one send per replica instance. The checks show the prune bug with a clock
moved by hand: a 24 h key, 600 other alerts 20 minutes later, the same alert again.
Sends are counted by the simulated alert sink, not by the replicas.`,
		},
		Expect: perReplica,
		Demo: []scenarios.DemoCase{
			{Label: "naive, 3 replicas, deploy", Replicas: 3, Waves: 2, Deploy: true, Variant: Naive},
			{Label: "claim in the store, 3 replicas, deploy", Replicas: 3, Waves: 2, Deploy: true, Variant: Fixed},
			{Label: "store down: fail open", Replicas: 3, Variant: FailOpen},
			{Label: "P0 bypasses dedupe", Replicas: 3, Variant: P0},
		},
	}
}

func jobSpec() scenarios.Spec {
	return scenarios.Spec{
		Name:   JobWindow,
		Lesson: "a periodic job on every replica runs once per replica per window unless the window is claimed in the shared store",
		Story: scenarios.Story{
			Naive: `every 2 minutes, on every replica:
    if lastRun == window { return }     // this replica's memory
    lastRun = window
    reconcile()   // lists thousands of items (~5 s); its writes are idempotent`,
			Breaks: `Nothing breaks loudly: the writes are idempotent, so R replicas running the job R times
corrupt nothing — they only multiply an expensive listing by R, every window.`,
			Fix: `Claim the window in the shared store — SET job:reconcile:<window start> 1 NX PX 120000 —
and run only if the claim is yours. A replica that starts late in the same window finds
the claim and does not run. If the store cannot be reached, run anyway: running twice is
harmless, not running is not (variant store-down).`,
			Numbers: `naive with 3 replicas: 3 listings per window. fixed: exactly 1, including the late
runners started by a deploy in the same window (--waves 2 --deploy) and the late-runner
check. store-down: every replica runs, all allowed by policy (see the note). Listings are
counted by the simulated inventory API.`,
		},
		Expect: perReplica,
		Demo: []scenarios.DemoCase{
			{Label: "naive, 3 replicas", Replicas: 3, Variant: Naive},
			{Label: "claimed window, 3 replicas + late runners", Replicas: 3, Waves: 2, Deploy: true, Variant: Fixed},
			{Label: "store down: runs anyway", Replicas: 3, Variant: StoreDown},
		},
	}
}

func rewardSpec() scenarios.Spec {
	return scenarios.Spec{
		Name:   RewardPayout,
		Lesson: "check, pay, record pays twice on a double tap; record first under UNIQUE, pay once, and pass the record id as the idempotency key",
		Story: scenarios.Story{
			Naive: `if !exists("SELECT 1 FROM reward_records WHERE user_id=? AND reward_id=?") {  // check
    pay(user, amount)                                                          // pay
    exec("INSERT INTO reward_records (user_id, reward_id, amount) VALUES (?,?,?)")  // record
}`,
			Breaks: `A double tap sends two requests; both check before either records, and both pay
(check-then-pay). Recording before paying does not help without a constraint: both
checks still pass (record-then-pay). Swallowing every insert error as "already paid"
turns any other failure into a silent non-payment (swallow-errors). And a payment that
is an external call cannot join the transaction: when its response is lost after it
succeeded, the retry pays again (external).`,
			Fix: `UNIQUE(user_id, reward_id); INSERT the record first and pay only if the insert
succeeded; only the duplicate-key error (1062 / 23505) means "already paid" (unique).
Record and an in-database payment in one transaction, so a failed payment rolls the
record back — on InnoDB; MyISAM ignores transactions and keeps the record without a
payment (tx, --engine myisam; the check says which engine the server used). For the
external call, pass the record's id as an idempotency key that the provider honours
(external-idempotent). Record-first means a failure under-pays rather than over-pays:
the note shows paid, recorded and the difference.`,
			Numbers: `check-then-pay and record-then-pay: several payments per burst; unique and tx:
exactly one. swallow-errors: a failure is injected into every record insert, so 0
payments is right (allowed 0) — but every attempt was told "already paid" instead of an
error (see the check). external: 2 payments per burst, counted by the simulated provider
(the first response is dropped after the payment succeeded; the retry pays again).
external-idempotent: 1. The note under each row shows paid, recorded and the difference.`,
		},
		Expect: func(p scenarios.Params) scenarios.Expectation {
			if p.Variant == SwallowErrors {
				// Every error is "already paid": the injected failure pays
				// nobody while every attempt hears "already paid".
				return scenarios.ExpectLost
			}
			return raceFor(CheckThenPay, RecordThenPay, External)(p)
		},
		Demo: []scenarios.DemoCase{
			{Label: "check, pay, record", Variant: CheckThenPay},
			{Label: "record then pay, no constraint", Variant: RecordThenPay},
			{Label: "UNIQUE, record first", Variant: UniqueRecord},
			{Label: "UNIQUE, every error = already paid", Variant: SwallowErrors},
			{Label: "record and pay in one transaction", Variant: OneTransaction},
			{Label: "external payment, response lost, retried", Variant: External},
			{Label: "external payment with idempotency key", Variant: ExternalIdempotent},
		},
	}
}

func leaseSpec() scenarios.Spec {
	return scenarios.Spec{
		Name:   LeasePause,
		Lesson: "a lease holder that pauses past its TTL writes after the next holder: two effects unless the store checks a fencing token",
		Story: scenarios.Story{
			Naive: `if !acquire("lease:"+job, me, ttl) { return }   // SET NX PX, or UPDATE ... WHERE lock_until < now
if done(job) { return }
// ... a GC pause, a stopped process: longer than the TTL ...
write(job, result)
release("lease:"+job)                           // DEL`,
			Breaks: `The lease expires while its holder is paused; a second holder takes it, finds the job not
done and writes. The first wakes up, still believing it holds the lease, and writes too:
two effects. Its release by plain DEL then removes whatever lease is there — the next
holder's — so a third can take it while the second still works.`,
			Fix: `Fencing (Kleppmann): each grant returns a token one higher than the last; every request
to the resource carries it, and the store refuses a write whose token is lower than one it
has already seen — the late writer's token 1 loses to the second holder's 2. The check
must carry it too: fence only the write, and a paused holder that wakes between the next
holder's check and its write still gets in (writes in token order, both accepted). Release
with compare-and-delete (delete only if the value is still mine).`,
			Numbers: `naive: 2 writes in most bursts (the paused holder and the next; a holder that stalls
before its check finds the job done and writes nothing). fenced: exactly 1 in every
burst; the paused holder's write is "declined: write refused". The checks show the release trap on this
backend: a plain delete frees the next holder's lease (a third is granted while it still
runs), compare-and-delete does not. Each burst lasts about 1.5 × --ttl: the pause is
real, in process.`,
		},
		Expect: raceFor(Naive),
		Demo: []scenarios.DemoCase{
			// Each burst waits out a real pause of 1.5 × TTL: 30 bursts keep the demo short.
			{Label: "no fencing", Variant: Naive, Bursts: 30},
			{Label: "fencing token checked by the store", Variant: Fenced, Bursts: 30},
		},
	}
}
