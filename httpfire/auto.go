package httpfire

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"

	"github.com/racetest/racetest/internal/sqldb"
	"github.com/racetest/racetest/runner"
)

// autoKinds are the stores --effects auto: measures over HTTP.
const autoKinds = "auto:postgres or auto:mysql"

// autoCheck measures the tables of a SQL server for --effects auto:STORE,
// on a connection of its own (the usual --postgres-url, --mysql-dsn).
type autoCheck struct {
	dialect sqldb.Dialect
	pg      *pgx.ConnConfig
	my      *mysql.Config
	watch   []string

	pgConn *pgx.Conn
	myDB   *sql.DB
	plan   *sqldb.SnapshotPlan
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
		raw := conn.PostgresURL
		if raw == "" {
			raw = defaultPostgresURL
		}
		cfg, err := pgx.ParseConfig(raw)
		if err != nil {
			return nil, inputErrorf("postgres-url", "cannot parse the PostgreSQL URL (%s): %v", redactURL(raw), errors.Unwrap(err))
		}
		return &autoCheck{dialect: sqldb.Postgres, pg: cfg, watch: ws}, nil
	case "mysql", "mariadb":
		cfg, err := sqldb.MySQLConfig(conn.MySQLDSN)
		if err != nil {
			return nil, &InputError{Field: "mysql-dsn", Err: err}
		}
		return &autoCheck{dialect: sqldb.MySQL, my: cfg, watch: ws}, nil
	}
	return nil, inputErrorf("effects", "auto:%s: --effects auto measures %s over HTTP", store, autoKinds)
}

func (a *autoCheck) describe() string {
	if a.pg != nil {
		return fmt.Sprintf("auto:postgres on %s:%d/%s", a.pg.Host, a.pg.Port, a.pg.Database)
	}
	return "auto:mysql on " + a.my.Addr + "/" + a.my.DBName
}

func (a *autoCheck) open(ctx context.Context) error {
	if a.pg != nil {
		c, err := pgx.ConnectConfig(ctx, a.pg)
		if err != nil {
			return fmt.Errorf("cannot connect to PostgreSQL at %s:%d: %w — is it running? set --postgres-url or RACETEST_POSTGRES_URL", a.pg.Host, a.pg.Port, err)
		}
		a.pgConn = c
		return nil
	}
	conn, err := mysql.NewConnector(a.my)
	if err != nil {
		return err
	}
	a.myDB = sql.OpenDB(conn)
	a.myDB.SetMaxOpenConns(1)
	if err := a.myDB.PingContext(ctx); err != nil {
		return fmt.Errorf("cannot connect to MySQL at %s: %w — is it running? set --mysql-dsn or RACETEST_MYSQL_DSN", a.my.Addr, err)
	}
	return nil
}

func (a *autoCheck) querier() sqldb.Querier {
	if a.pgConn != nil {
		return sqldb.Pgx(a.pgConn)
	}
	return sqldb.Std(a.myDB)
}

// snapshot reads the watched tables; the first one lists them.
func (a *autoCheck) snapshot(ctx context.Context) (runner.Snapshot, error) {
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
	return a.plan.Read(ctx, q)
}

func (a *autoCheck) close() error {
	if a.pgConn != nil {
		return a.pgConn.Close(context.Background())
	}
	if a.myDB != nil {
		return a.myDB.Close()
	}
	return nil
}
