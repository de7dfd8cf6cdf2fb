package sqldb

import (
	"context"
	"fmt"
	"strings"

	"github.com/racetest/racetest/internal/sqldialect"
)

// HiddenReach asks the server's catalog which of tables a statement may
// reach past what its text names: a table with a trigger, a foreign key
// (either end: its actions write the other table, its checks read it), a
// rule, row-level security, inheritance or partitions, a default or check
// that calls the user's function, or a relation that is no plain table (a
// view, a sequence, a foreign table). Each such name maps to why; so does
// a name the catalog does not hold. tables are names in lower case, each
// asked of every schema (explore reads a table without its schema, so any
// table of that name counts). The questions only read the catalog.
func HiddenReach(ctx context.Context, d Dialect, q Querier, tables []string) (map[string]string, error) {
	return sqldialect.Pick(d, MySQLHiddenReach, PostgresHiddenReach)(ctx, q, tables)
}

// pgHiddenReach lists (name, why) for each of $1's names: a relation of
// that name (in any schema, case aside) that reaches past itself, or no
// relation of that name at all. Indexes, composite types and TOAST tables
// share the names' space but are never read as tables.
const pgHiddenReach = `
WITH names AS (SELECT DISTINCT unnest($1::text[]) AS name),
rel AS (
  SELECT names.name, c.oid, c.relkind, c.relrowsecurity, c.reltype
  FROM names JOIN pg_class c ON lower(c.relname) = names.name
  WHERE c.relkind NOT IN ('i', 'I', 'c', 't')
)
SELECT r.name, w.why FROM rel r CROSS JOIN LATERAL (
  SELECT CASE r.relkind WHEN 'v' THEN 'a view' WHEN 'm' THEN 'a materialized view' WHEN 'p' THEN 'a partitioned table'
    WHEN 'f' THEN 'a foreign table' WHEN 'S' THEN 'a sequence' ELSE 'a relation of kind ' || r.relkind::text END AS why
    WHERE r.relkind <> 'r'
  UNION ALL SELECT 'a trigger (' || t.tgname::text || ')' FROM pg_trigger t WHERE t.tgrelid = r.oid AND NOT t.tgisinternal
  UNION ALL SELECT 'a foreign key (' || k.conname::text || ')' FROM pg_constraint k
    WHERE k.contype = 'f' AND (k.conrelid = r.oid OR k.confrelid = r.oid)
  UNION ALL SELECT 'a rule (' || w.rulename::text || ')' FROM pg_rewrite w WHERE w.ev_class = r.oid AND w.rulename <> '_RETURN'
  UNION ALL SELECT 'inheritance or a partition' FROM pg_inherits i WHERE i.inhrelid = r.oid OR i.inhparent = r.oid
  UNION ALL SELECT 'row-level security' WHERE r.relrowsecurity
  UNION ALL SELECT 'a default or check calling ' || p.proname::text || '()' FROM pg_depend d
    JOIN pg_proc p ON d.refclassid = 'pg_proc'::regclass AND p.oid = d.refobjid
    WHERE p.pronamespace <> 'pg_catalog'::regnamespace AND (
      d.classid = 'pg_attrdef'::regclass AND d.objid IN (SELECT oid FROM pg_attrdef WHERE adrelid = r.oid)
      OR d.classid = 'pg_constraint'::regclass AND d.objid IN (SELECT oid FROM pg_constraint WHERE conrelid = r.oid))
  UNION ALL SELECT 'a column of a domain (' || ty.typname::text || ')' FROM pg_attribute a JOIN pg_type ty ON ty.oid = a.atttypid
    WHERE a.attrelid = r.oid AND a.attnum > 0 AND NOT a.attisdropped AND ty.typtype = 'd'
  UNION ALL SELECT 'a function of its rows (' || p.proname::text || '(), callable as a column)' FROM pg_proc p
    WHERE r.reltype = ANY (p.proargtypes::oid[])
) w
UNION ALL
SELECT n.name, 'not in the catalog'::text FROM names n WHERE NOT EXISTS (SELECT 1 FROM rel r WHERE r.name = n.name)`

// PostgresHiddenReach is HiddenReach on PostgreSQL: pg_class, pg_trigger,
// pg_constraint, pg_rewrite, pg_inherits, pg_depend, pg_attribute and
// pg_proc.
func PostgresHiddenReach(ctx context.Context, q Querier, tables []string) (map[string]string, error) {
	out := map[string]string{}
	if len(tables) == 0 {
		return out, nil
	}
	rows, err := q.Query(ctx, pgHiddenReach, tables)
	if err != nil {
		return nil, fmt.Errorf("postgres: reading the catalog of tables %s: %w", strings.Join(tables, ", "), err)
	}
	for _, r := range rows.Values {
		name, why := fmt.Sprint(r[0]), fmt.Sprint(r[1])
		if _, seen := out[name]; !seen {
			out[name] = why
		}
	}
	return out, nil
}

// myHiddenReach lists (name, why) for one name (? five times), in any
// schema, case aside. MySQL and MariaDB have no rules, inheritance or
// row-level security, and their defaults, checks and generated columns
// may not call a stored function.
const myHiddenReach = `
SELECT CONCAT('a ', LOWER(TABLE_TYPE)) FROM information_schema.TABLES WHERE LOWER(TABLE_NAME) = ? AND TABLE_TYPE <> 'BASE TABLE'
UNION ALL SELECT CONCAT('a trigger (', TRIGGER_NAME, ')') FROM information_schema.TRIGGERS WHERE LOWER(EVENT_OBJECT_TABLE) = ?
UNION ALL SELECT CONCAT('a foreign key (', CONSTRAINT_NAME, ')') FROM information_schema.REFERENTIAL_CONSTRAINTS
  WHERE LOWER(TABLE_NAME) = ? OR LOWER(REFERENCED_TABLE_NAME) = ?
UNION ALL SELECT 'not in the catalog' FROM DUAL WHERE NOT EXISTS (SELECT 1 FROM information_schema.TABLES WHERE LOWER(TABLE_NAME) = ?)`

// MySQLHiddenReach is HiddenReach on MySQL and MariaDB:
// information_schema's TABLES (views, sequences, system-versioned
// tables), TRIGGERS and REFERENTIAL_CONSTRAINTS.
func MySQLHiddenReach(ctx context.Context, q Querier, tables []string) (map[string]string, error) {
	out := map[string]string{}
	for _, name := range tables {
		rows, err := q.Query(ctx, myHiddenReach, name, name, name, name, name)
		if err != nil {
			return nil, fmt.Errorf("mysql: reading the catalog of table %s: %w", name, err)
		}
		if len(rows.Values) > 0 {
			out[name] = fmt.Sprint(rows.Values[0][0])
		}
	}
	return out, nil
}
