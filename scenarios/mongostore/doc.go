// Package mongostore is racetest's MongoDB backend (mongo-driver v2): the five
// core scenarios on one database of a MongoDB server, or of a server that
// speaks its wire protocol (FerretDB), which it detects and names.
//
// # Connecting
//
// --mongo-uri or RACETEST_MONGO_URI; default mongodb.DefaultURI
// (mongodb://127.0.0.1:27017/?directConnection=true). The collections go to
// the database the URI's path names, else mongodb.DefaultDatabase ("racetest"). Server
// selection and connecting time out after 3 s unless the URI sets its own
// serverSelectionTimeoutMS/connectTimeoutMS, so an absent server is one line:
// "mongo: cannot connect to 127.0.0.1:27017 (connection refused) — is the
// server running? ...". Passwords are replaced by xxxxx (mongodb.Redact).
//
// The server is named from buildInfo: "MongoDB 7.0.14", or, when buildInfo
// has ferretdbVersion, "FerretDB 1.24.2 (MongoDB 7.0.42 wire)".
//
// # Connections
//
// Each replica is one *mongo.Client, as an application process has one, with
// MaxPoolSize = MinPoolSize = its workers. The driver does not let a caller
// own a connection: every operation checks one out of the pool. So Open fills
// the pool before the first burst — one goroutine per worker pings until the
// pool holds a connection for each (MaxConnecting = workers, so they are
// dialled together rather than two at a time) — and every attempt then takes
// an idle connection that is already dialled and authenticated. A test proves
// no connection is dialled after the first burst. A client per worker (pool
// of one) gave the same overlap and no better release spread, at the cost of
// a monitor per worker (docs/measurements.md); so a client per replica it is.
//
// Except under a wire release (Params.Dial set: --release last-byte), which
// must know whose connection a request goes on: there each worker's session
// opens a client of its own with one connection (MaxPoolSize = MinPoolSize =
// 1), pinged inside the worker's claim window, and the server is polled
// rather than streamed unless the URI says otherwise, so that each client
// has one monitor connection, not two. The replicas stay what they were:
// memory-set's set is still one per replica. Every connection — pools,
// monitors, racetest's own control client — is dialled through Params.Dial
// when it is set (options.Client().SetDialer); a monitor's connection only
// ever sends hello, which the release never takes for a worker's, so it is
// never held.
//
// # Collections
//
// Prepare creates the run's collections, racetest_<runid>_<name>, with their
// indexes; Cleanup drops exactly those (a collection that already exists is
// never adopted), also after Ctrl-C, and names those it could not drop.
//
// # The scenarios
//
// memory-set: the "processing" set is a map in the replica's memory, under a
// mutex; the first attempt per replica inserts {key} into
// racetest_<runid>_effects. Effects: documents with that key.
//
// check-then-write: findOne({key}) on racetest_<runid>_effects (a plain,
// non-unique index on key), then, if nothing was found, insertOne({key}).
// Nothing on the server connects the two: every attempt whose findOne ran
// before the first insert writes. Effects: documents with that key. After
// counting, a burst's documents move to racetest_<runid>_effects_settled, so
// that the live collection stays small: FerretDB (SQLite) uses an index only
// for a filter on _id alone and scans every document for any other filter.
//
// conditional-update: Reset inserts {_id: key, status: "issued",
// redemptions: 0} into racetest_<runid>_coupons. The attempt is one
// findOneAndUpdate({_id: key, status: "issued"}, {$set: {status: "redeemed"},
// $inc: {redemptions: 1}}); mongo.ErrNoDocuments is "declined". The attempt
// that got the coupon back pays: it inserts one document into the effects
// collection, and those documents are the effects. The $inc counter is not
// the ground truth, because on a server whose updates are not atomic
// (FerretDB 1.x) concurrent $inc updates are lost, and the counter would hide
// the very double redemptions the scenario exists to find; when the two
// disagree the report says by how much. On MongoDB, a single-document update
// is atomic: exactly one attempt matches. On FerretDB 1.x findAndModify reads
// the document, changes it in Go and replaces it by _id without re-checking
// the filter, so several attempts "redeem" the same coupon: RACE, which is
// the truth about that server, not a flaw of the pattern.
//
// unique-insert: insertOne({key}) into racetest_<runid>_saves, which has a
// unique index on key. Only mongo.IsDuplicateKeyError (E11000) is "declined";
// every other error is an error. Variant VariantOneActive ("one-active"):
// "one active per user" — a unique index on user with partialFilterExpression
// {active: true} on racetest_<runid>_sanctions; each burst's user already has
// an inactive document, which the index must ignore, and a check after the run
// shows that a second active document is refused and a new one is allowed
// once the first is deactivated. FerretDB 1.x refuses partialFilterExpression
// (code 238 NotImplemented): the run stops at Prepare with an error that says
// so.
//
// ttl-lease: Reset inserts the lease a previous holder left to expire,
// {_id: key, lockUntil: 1970-01-01}, into racetest_<runid>_leases. The attempt
// takes it with one findOneAndUpdate whose filter says "expired", sets owner
// and lockUntil = now + TTL, and increments the fencing token. Where the
// server can read its own clock in an update (MongoDB 4.2+), the filter is
// {_id, $expr: {$lt: ["$lockUntil", "$$NOW"]}} and the update a pipeline using
// $$NOW, so expiry is the server's clock; $expr is refused in an upsert, which
// is why the lease document exists beforehand, and a held lease matches
// nothing (ErrNoDocuments: not acquired). FerretDB refuses both pipelines and
// $expr (238 NotImplemented), so there the filter is {_id, lockUntil: {$lt:
// now}} with racetest's clock, upsert: true, and a held lease makes the
// upsert insert a second _id: E11000, also "not acquired"; the report notes
// which clock was used and how far the server's clock (hello.localTime) is
// from racetest's. Every grant is recorded in racetest_<runid>_grants with
// its validity; the effects are the most grants valid at one instant. A
// check shows liveness: a holder that dies without releasing is refused to
// others before the TTL and not after. On MongoDB one holder at a time; on
// FerretDB 1.x the takeover races like conditional-update. (There the first
// grant of a lease that does not exist yet is safe — the upsert's insert
// meets _id's uniqueness — so a burst at a fresh key would hide the race that
// every later grant has; docs/measurements.md.)
package mongostore
