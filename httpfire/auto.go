package httpfire

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"

	"github.com/redis/go-redis/v9"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/connstring"

	"github.com/racetest/racetest/internal/mongodb"
	"github.com/racetest/racetest/internal/sqldb"
	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios/mongostore"
	"github.com/racetest/racetest/scenarios/mysqlstore"
	"github.com/racetest/racetest/scenarios/redisstore"
)

// autoKinds are the stores --effects auto: measures over HTTP.
const autoKinds = "auto:postgres, auto:mysql, auto:redis or auto:mongo"

// autoOnRedis names, in the refusal of a Redis Cluster, what refuses it:
// its snapshot SCANs one server, and would see one node's keys only.
const autoOnRedis = "--effects auto:redis (racetest http)"

// autoCheck measures the tables of a SQL server for --effects auto:STORE,
// on a connection of its own (the usual --postgres-url, --mysql-dsn).
type autoCheck struct {
	dialect sqldb.Dialect
	pg      *pgx.ConnConfig
	my      *mysql.Config
	watch   []string

	redis *redis.Options
	mongo string // URI; the database is the URI's, else racetest's default
	// ferretDB: the MongoDB server is FerretDB, whose updates are not
	// atomic (docs/mongodb-in-ci.md): the service's losses may be its.
	ferretDB bool

	pgConn *pgx.Conn
	myDB   *sql.DB
	plan   *sqldb.SnapshotPlan
	rdb    *redis.Client
	rsnap  redisstore.Snapshotter // the run's, across its snapshots
	mcl    *mongo.Client
	mdb    *mongo.Database
}

func parseAuto(store string, watch []string, t *Target) (*autoCheck, error) {
	ws := make([]string, 0, len(watch))
	for _, w := range watch {
		for _, name := range strings.Split(w, ",") {
			if name = strings.TrimSpace(name); name != "" {
				ws = append(ws, strings.ReplaceAll(name, "{{.RunID}}", t.p.RunID))
			}
		}
	}
	conn := t.p.Conn
	switch store {
	case "postgres", "postgresql", "pg":
		cfg, err := pgConfig(conn)
		if err != nil {
			return nil, err
		}
		return &autoCheck{dialect: sqldb.Postgres, pg: cfg, watch: ws}, nil
	case "mysql", "mariadb":
		cfg, err := sqldb.MySQLConfig(conn.Get(mysqlstore.Name))
		if err != nil {
			return nil, &InputError{Field: "mysql-dsn", Err: err}
		}
		return &autoCheck{dialect: sqldb.MySQL, my: cfg, watch: ws}, nil
	case "redis":
		opt, err := redisOptions(conn, autoOnRedis)
		if err != nil {
			return nil, err
		}
		if len(ws) == 0 {
			return nil, inputErrorf("watch", "--effects auto:redis measures the keys --watch names: add --watch 'PATTERN,…' (e.g. --watch 'coupon:*')")
		}
		return &autoCheck{redis: opt, watch: ws}, nil
	case "mongo", "mongodb":
		uri := conn.Get(mongostore.Name)
		if uri == "" {
			uri = defaultMongoURI
		}
		return &autoCheck{mongo: uri, watch: ws}, nil
	}
	return nil, inputErrorf("effects", "auto:%s: --effects auto measures %s over HTTP", store, autoKinds)
}

func (a *autoCheck) describe() string {
	if a.redis != nil {
		return "auto:redis on " + a.redis.Addr
	}
	if a.mongo != "" {
		return "auto:mongo on " + mongodb.Redact(a.mongo)
	}
	if a.pg != nil {
		return fmt.Sprintf("auto:postgres on %s:%d/%s", a.pg.Host, a.pg.Port, a.pg.Database)
	}
	return "auto:mysql on " + a.my.Addr + "/" + a.my.DBName
}

// note is what a reader of the report must know of the store, or "".
func (a *autoCheck) note() string {
	if a.ferretDB {
		return "mongo: the store is FerretDB, which runs findAndModify and updates (conditional ones, $inc) as a read and a replace, not atomically: a RACE or LOST there may be FerretDB's, not the service's"
	}
	return strings.Join(a.plan.Notes(), "; ")
}

func (a *autoCheck) open(ctx context.Context) error {
	if a.redis != nil {
		// A plain URL may name one node of a cluster: a snapshot there
		// would read that node's keys only.
		rdb, err := openRedis(ctx, a.redis, autoOnRedis)
		a.rdb = rdb
		return err
	}
	if a.mongo != "" {
		cs, err := connstring.ParseAndValidate(a.mongo)
		if err != nil {
			return &InputError{Field: "mongo-uri", Err: fmt.Errorf("invalid URI %s", mongodb.Redact(a.mongo))}
		}
		db := cs.Database
		if db == "" {
			db = mongodb.DefaultDatabase
		}
		cl, err := mongo.Connect(options.Client().ApplyURI(a.mongo))
		if err != nil {
			return err
		}
		a.mcl, a.mdb = cl, cl.Database(db)
		if err := cl.Ping(ctx, nil); err != nil {
			return fmt.Errorf("cannot connect to MongoDB at %s: %w — is it running? set --mongo-uri or RACETEST_MONGO_URI", mongodb.Redact(a.mongo), err)
		}
		var info struct {
			FerretDBVersion string `bson:"ferretdbVersion"`
		}
		if err := a.mdb.RunCommand(ctx, bson.D{{Key: "buildInfo", Value: 1}}).Decode(&info); err == nil {
			a.ferretDB = info.FerretDBVersion != ""
		}
		return nil
	}
	if a.pg != nil {
		c, err := pgx.ConnectConfig(ctx, a.pg)
		if err != nil {
			return fmt.Errorf("cannot connect to PostgreSQL at %s:%d: %w — is it running? set --postgres-url or RACETEST_POSTGRES_URL", a.pg.Host, a.pg.Port, err)
		}
		a.pgConn = c
		return nil
	}
	db, err := openMySQL(ctx, a.my)
	a.myDB = db
	return err
}

func (a *autoCheck) querier() sqldb.Querier {
	if a.pgConn != nil {
		return sqldb.Pgx(a.pgConn)
	}
	return sqldb.Std(a.myDB)
}

// snapshot reads the watched tables; the first one lists them.
func (a *autoCheck) snapshot(ctx context.Context) (runner.Snapshot, error) {
	if a.rdb != nil || a.mdb != nil {
		var s runner.Snapshot
		var err error
		if a.rdb != nil {
			s, err = a.rsnap.Snapshot(ctx, a.rdb, a.watch)
		} else {
			s, err = mongostore.Snapshot(ctx, a.mdb, a.watch)
		}
		var se *runner.SnapshotError
		if errors.As(err, &se) {
			return nil, &InputError{Field: "effects", Err: se}
		}
		return s, err
	}
	q := a.querier()
	if a.plan == nil {
		p, err := sqldb.PlanSnapshot(ctx, a.dialect, q, a.watch)
		if err != nil {
			var se *runner.SnapshotError
			if errors.As(err, &se) {
				return nil, &InputError{Field: "effects", Err: se}
			}
			return nil, err
		}
		a.plan = p
	}
	return sqldb.ReadSnapshot(ctx, a.plan, q)
}

func (a *autoCheck) close() error {
	if a.rdb != nil {
		return a.rdb.Close()
	}
	if a.mcl != nil {
		return a.mcl.Disconnect(context.Background())
	}
	if a.pgConn != nil {
		return a.pgConn.Close(context.Background())
	}
	if a.myDB != nil {
		return a.myDB.Close()
	}
	return nil
}

// IsAuto reports whether an effects value asks for --effects auto:STORE.
func IsAuto(effects string) bool { return strings.HasPrefix(effects, "auto:") }
