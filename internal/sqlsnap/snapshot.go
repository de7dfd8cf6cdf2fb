// Package sqlsnap reads a snapshot of a SQL schema for --effects auto:
// per watched table its row count and the sum of each numeric column. It
// imports no driver: internal/sqldb runs it on racetest's connections, the
// race package on a team's own *sql.DB.
package sqlsnap

import (
	"context"
	"database/sql"
	"fmt"
	"math/big"
	"slices"
	"sort"
	"strings"

	"github.com/racetest/racetest/internal/sqldialect"
	"github.com/racetest/racetest/runner"
)

// Querier runs racetest's own statements: Rows reads a whole result, each
// value as the driver decodes it; Row scans one row.
type Querier interface {
	Rows(ctx context.Context, query string) ([][]any, error)
	Row(ctx context.Context, query string, dest ...any) error
}

// Limits are what a plan refuses past: tables, and bytes of table data.
type Limits struct{ Tables, Bytes int64 }

// DefaultLimits are MaxSnapshotTables and MaxSnapshotBytes.
var DefaultLimits = Limits{MaxSnapshotTables, MaxSnapshotBytes}

// A snapshot of a schema, for --effects auto: per watched table its row
// count and the sum of each numeric column, read exactly (count(*) and
// sum(), never the planner's estimates) on racetest's own connection while
// no attempt runs. The tables are those of the connection's schema
// (PostgreSQL's current_schema(), MySQL's DATABASE()) but racetest's own
// (named racetest_…: the registry, and the tables of runs, this one's or
// another's, that come and go on a shared database), or those --watch
// names; never the registry table, never another schema.
//
// A database shared with others changes shape under a run: a table is
// created or dropped, a column altered. That is another writer at work,
// and a snapshot cannot say between which two of its reads it happened,
// so from the first change it sees on, every snapshot carries a value
// that differs from the one before (ShapeKey): each later burst reads as
// changed while nothing ran, and the run INCONCLUSIVE, never an error
// and never a difference put down to the attempts.

// Limits on what a snapshot reads per burst (five snapshots a burst with
// a solo twin): past them a run is refused, with the way out.
const (
	// MaxSnapshotTables is the most tables a snapshot reads.
	MaxSnapshotTables = 100
	// MaxSnapshotBytes is the most table data (the server's own size of
	// the watched tables; PostgreSQL's as of its last VACUUM or ANALYZE)
	// a snapshot reads: its cost grows with it. 20
	// tables of 10^6 rows in all, 50-58 MiB, took 0.9 s (PostgreSQL) and
	// 1.1 s (MariaDB) per snapshot on 2 cores at load 21
	// (docs/measurements.md); 256 MiB is some 5 s a snapshot there.
	MaxSnapshotBytes = 256 << 20
)

// RegistryTable is racetest's own table of runs, never watched.
const RegistryTable = "racetest_runs"

// RunPrefix starts the names of racetest's own tables (the registry, and
// every run's): a snapshot of the whole schema leaves them out.
const RunPrefix = "racetest_"

// ShapeKey is the key of a Snapshot that counts the snapshots read since
// a table of schema was created or dropped (or its columns changed), the
// first such table named: "tables created or dropped in test: orders".
func ShapeKey(schema, table string) string {
	return fmt.Sprintf("tables created or dropped in %s: %s", schema, table)
}

// SnapshotPlan is what a snapshot of one schema reads.
type SnapshotPlan struct {
	dialect sqldialect.Dialect
	Schema  string
	Tables  []SnapshotTable
	// Bytes is the watched tables' data size, as the server reports it.
	Bytes int64
	// Aside are the numeric columns (TABLE.COLUMN) --watch left out of
	// the comparison: set aside by -TABLE.COLUMN, or not named where
	// TABLE.COLUMN named others of the table.
	Aside []string
	// watched: the tables are those --watch named, and another table
	// that comes or goes is none of the snapshot's business.
	watched bool
	// shape is the key (ShapeKey) of the first change of the schema's
	// tables a read saw, "" before one; since counts the reads from it.
	shape string
	since int64
}

// SnapshotTable is one watched table: its name, and the numeric columns
// whose sums are read. Key and identity (serial, auto_increment) columns
// are left out: they name rows, they are not quantities.
type SnapshotTable struct {
	Name    string
	Columns []string
	// Float marks the columns of floating-point types, whose sums are
	// rounded to 6 decimal places (a float sum depends on the order of
	// the rows).
	Float map[string]bool
}

// numericTypes are the column types whose sums a snapshot reads.
var numericTypes = map[sqldialect.Dialect]map[string]bool{
	sqldialect.Postgres: {"smallint": true, "integer": true, "bigint": true, "numeric": true, "real": true, "double precision": true, "money": false},
	sqldialect.MySQL:    {"tinyint": true, "smallint": true, "mediumint": true, "int": true, "integer": true, "bigint": true, "decimal": true, "numeric": true, "float": true, "double": true, "real": true},
}

var floatTypes = map[string]bool{"real": true, "double precision": true, "float": true, "double": true}

// listing reads the schema's tables and their columns: name, column, data
// type, whether the column is a key or an identity, and the table's size.
var listing = map[sqldialect.Dialect]string{
	// The catalog, not information_schema: a table another session drops
	// meanwhile is simply not there, where a cast of its name to regclass
	// would fail the listing. The size is the catalog's (relpages, as of
	// the last VACUUM or ANALYZE), not pg_relation_size's: that takes a
	// lock on every table of the schema, and waited behind another
	// session's DROP TABLE (itself waiting for a long transaction) until
	// the run failed after 30 s, on tables --watch had left out.
	sqldialect.Postgres: `SELECT c.relname::text, COALESCE(a.attname::text, ''), COALESCE(format_type(a.atttypid, NULL), ''),
  COALESCE(a.attidentity <> '' OR pg_get_expr(d.adbin, d.adrelid) LIKE 'nextval(%' OR a.attnum = ANY(i.indkey), false),
  GREATEST(c.relpages, 0)::bigint * current_setting('block_size')::bigint, current_schema()::text
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
LEFT JOIN pg_attrdef d ON d.adrelid = c.oid AND d.adnum = a.attnum
LEFT JOIN pg_index i ON i.indrelid = c.oid AND i.indisprimary
WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p')
ORDER BY c.relname, a.attnum`,
	sqldialect.MySQL: `SELECT t.table_name, COALESCE(c.column_name, ''), COALESCE(c.data_type, ''),
  COALESCE(c.column_key = 'PRI' OR c.extra LIKE '%auto_increment%', 0),
  COALESCE(t.data_length, 0), DATABASE()
FROM information_schema.tables t
LEFT JOIN information_schema.columns c ON c.table_schema = t.table_schema AND c.table_name = t.table_name
WHERE t.table_schema = DATABASE() AND t.table_type = 'BASE TABLE'
ORDER BY t.table_name, c.ordinal_position`,
}

// tableNames lists the names of the schema's tables: what each read of a
// whole schema compares with its plan, cheaply.
var tableNames = map[sqldialect.Dialect]string{
	sqldialect.Postgres: `SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p')`,
	sqldialect.MySQL: `SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() AND table_type = 'BASE TABLE'`,
}

// ownTable reports whether a table is racetest's own: the registry, or a
// run's.
func ownTable(name string) bool { return strings.HasPrefix(name, RunPrefix) }

// schemaTables is a listing read: the schema's tables by name, in the
// listing's order, and the schema's name.
type schemaTables struct {
	schema string
	names  []string
	byName map[string]*SnapshotTable
	sizes  map[string]int64
}

// readListing reads the listing of the schema's tables and columns.
func readListing(ctx context.Context, d sqldialect.Dialect, q Querier) (*schemaTables, error) {
	query, ok := listing[d]
	if !ok {
		return nil, fmt.Errorf("sqlsnap: no snapshot for SQL dialect %q (known: mysql, postgres)", d)
	}
	values, err := q.Rows(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("%s: listing the schema's tables for --effects auto: %w", d, err)
	}
	l := &schemaTables{byName: map[string]*SnapshotTable{}, sizes: map[string]int64{}}
	for _, r := range values {
		name, col, typ := text(r[0]), text(r[1]), strings.ToLower(text(r[2]))
		l.schema = text(r[5])
		if name == RegistryTable {
			continue
		}
		t := l.byName[name]
		if t == nil {
			t = &SnapshotTable{Name: name, Float: map[string]bool{}}
			l.byName[name] = t
			l.names = append(l.names, name)
			l.sizes[name] = integer(r[4])
		}
		if col != "" && numericTypes[d][typ] && !truth(r[3]) {
			t.Columns = append(t.Columns, col)
			t.Float[col] = floatTypes[typ]
		}
	}
	if l.schema == "" {
		l.schema = "(the connection's, empty)"
	}
	return l, nil
}

// Plan lists what a snapshot of the connection's schema reads: every
// table but racetest's own, or the tables watch names (exactly, or else
// ignoring case; a run's table too, when named).
func Plan(ctx context.Context, d sqldialect.Dialect, q Querier, watch []string, lim Limits) (*SnapshotPlan, error) {
	l, err := readListing(ctx, d, q)
	if err != nil {
		return nil, err
	}
	tables, cols, err := splitWatch(watch)
	if err != nil {
		return nil, err
	}
	p := &SnapshotPlan{dialect: d, Schema: l.schema, watched: len(tables) > 0}
	var chosen []string
	for _, n := range l.names {
		if !ownTable(n) {
			chosen = append(chosen, n)
		}
	}
	if len(tables) > 0 {
		if chosen, err = pick(l.names, tables, p.Schema); err != nil {
			return nil, err
		}
	}
	for _, n := range chosen {
		p.Tables = append(p.Tables, *l.byName[n])
		p.Bytes += l.sizes[n]
	}
	if err := p.columns(cols); err != nil {
		return nil, err
	}
	maxTables, maxBytes := lim.Tables, lim.Bytes
	if int64(len(p.Tables)) > maxTables {
		return nil, &runner.SnapshotError{Msg: fmt.Sprintf("--effects auto: schema %s has %d tables, more than the %d a snapshot reads per burst — name the tables the attempt writes with --watch TABLE,…, or count the effects with --effects QUERY",
			p.Schema, len(p.Tables), maxTables)}
	}
	if p.Bytes > maxBytes {
		return nil, &runner.SnapshotError{Msg: fmt.Sprintf("--effects auto: the watched tables of schema %s hold %d MiB, more than the %d MiB a snapshot reads per burst (a burst with its solo twin reads them five times) — name the tables the attempt writes with --watch TABLE,…, or count the effects with --effects QUERY",
			p.Schema, p.Bytes>>20, maxBytes>>20)}
	}
	return p, nil
}

// columnRule is a --watch entry that names a column: TABLE.COLUMN compares
// only the columns so named of its table (its rows always), -TABLE.COLUMN
// sets the column aside.
type columnRule struct {
	table, column string
	aside         bool
	entry         string
}

// splitWatch parts --watch's entries into tables (TABLE, and the table of
// each TABLE.COLUMN) and column rules. Only the schema's tables are read,
// so a dot in an entry names a column, never another schema.
func splitWatch(watch []string) (tables []string, cols []columnRule, err error) {
	for _, w := range watch {
		aside := strings.HasPrefix(w, "-")
		t, c, dotted := strings.Cut(strings.TrimPrefix(w, "-"), ".")
		switch {
		case aside && !dotted:
			return nil, nil, &runner.SnapshotError{Msg: fmt.Sprintf("--watch %s: a leading '-' sets a column aside: give TABLE.COLUMN (-%s.COLUMN), or the table's name alone to watch it", w, t)}
		case dotted && (t == "" || c == "" || strings.Contains(c, ".")):
			return nil, nil, &runner.SnapshotError{Msg: fmt.Sprintf("--watch %s: want TABLE, TABLE.COLUMN (compare only that column's sum) or -TABLE.COLUMN (set it aside); another schema's tables are never read", w)}
		case !dotted:
			tables = append(tables, t)
		default:
			cols = append(cols, columnRule{table: t, column: c, aside: aside, entry: w})
			if !aside {
				tables = append(tables, t)
			}
		}
	}
	return tables, cols, nil
}

// columns applies the column rules to the plan's tables: a table with a
// TABLE.COLUMN rule keeps only the columns so named, then each
// -TABLE.COLUMN leaves its column out; each named column must be one the
// snapshot sums (numeric, not a key). Aside lists what was left out.
func (p *SnapshotPlan) columns(rules []columnRule) error {
	only := map[string]map[string]bool{}
	for _, r := range rules {
		i := p.table(r.table)
		if i < 0 {
			return &runner.SnapshotError{Msg: fmt.Sprintf("--watch %s: no table %q among those the snapshot reads (%s)", r.entry, r.table, p.tableNames())}
		}
		t := &p.Tables[i]
		col := ""
		for _, c := range t.Columns {
			if c == r.column || col == "" && strings.EqualFold(c, r.column) {
				col = c
			}
		}
		if col == "" {
			sums := strings.Join(t.Columns, ", ")
			if sums == "" {
				sums = "none"
			}
			return &runner.SnapshotError{Msg: fmt.Sprintf("--watch %s: %s has no column %q whose sum a snapshot compares (its numeric columns that are not keys: %s); its rows are always compared", r.entry, t.Name, r.column, sums)}
		}
		if r.aside {
			continue
		}
		if only[t.Name] == nil {
			only[t.Name] = map[string]bool{}
		}
		only[t.Name][col] = true
	}
	for i := range p.Tables {
		t := &p.Tables[i]
		var kept []string
		for _, c := range t.Columns {
			keep := only[t.Name] == nil || only[t.Name][c]
			for _, r := range rules {
				if r.aside && strings.EqualFold(r.table, t.Name) && strings.EqualFold(r.column, c) {
					keep = false
				}
			}
			if keep {
				kept = append(kept, c)
			} else {
				p.Aside = append(p.Aside, t.Name+"."+c)
			}
		}
		t.Columns = kept
	}
	return nil
}

// Notes are the report's lines on what the plan sets aside (none for a
// nil plan: no snapshot was taken).
func (p *SnapshotPlan) Notes() []string {
	if p == nil || len(p.Aside) == 0 {
		return nil
	}
	return []string{"not compared (set aside by --watch): " + strings.Join(p.Aside, ", ") + "; each table's rows still are"}
}

// table is the index of the plan's table named name (exactly, or else
// ignoring case), or -1.
func (p *SnapshotPlan) table(name string) int {
	for i, t := range p.Tables {
		if t.Name == name {
			return i
		}
	}
	for i, t := range p.Tables {
		if strings.EqualFold(t.Name, name) {
			return i
		}
	}
	return -1
}

func (p *SnapshotPlan) tableNames() string {
	var ns []string
	for _, t := range p.Tables {
		ns = append(ns, t.Name)
	}
	if len(ns) == 0 {
		return "none"
	}
	return strings.Join(ns, ", ")
}

// pick finds each watched name among the tables.
func pick(names, watch []string, schema string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, w := range watch {
		found := ""
		for _, n := range names {
			if n == w {
				found = n
			}
		}
		if found == "" {
			for _, n := range names {
				if strings.EqualFold(n, w) {
					found = n
				}
			}
		}
		if found == "" {
			list := strings.Join(names, ", ")
			if list == "" {
				list = "none"
			}
			return nil, &runner.SnapshotError{Msg: fmt.Sprintf("--watch: no table %q in schema %s (its tables: %s)", w, schema, list)}
		}
		if !seen[found] {
			seen[found] = true
			out = append(out, found)
		}
	}
	sort.Strings(out)
	return out, nil
}

// Read takes the snapshot: one statement per table, count(*) and the sums
// together in one pass over it. A read of the whole schema first lists
// its tables' names, and a table that is not in the plan, or a planned
// one gone, is a change of the schema's shape (see ShapeKey); so is a
// watched table whose read fails because it is gone or its columns
// changed. A table gone is read no more.
func (p *SnapshotPlan) Read(ctx context.Context, q Querier) (runner.Snapshot, error) {
	if !p.watched && p.shape == "" {
		if err := p.compareNames(ctx, q); err != nil {
			return nil, err
		}
	}
	s := runner.Snapshot{}
	tables := p.Tables[:0:0]
	for _, t := range p.Tables {
		query := p.query(t)
		dest := make([]sql.NullString, 1+len(t.Columns))
		ptrs := make([]any, len(dest))
		for i := range dest {
			ptrs[i] = &dest[i]
		}
		if err := q.Row(ctx, query, ptrs...); err != nil {
			if p.reshaped(ctx, q, t) {
				continue
			}
			return nil, fmt.Errorf("%s: snapshot of %s: %w", p.dialect, t.Name, err)
		}
		tables = append(tables, t)
		keys := append([]string{t.Name + runner.RowsSuffix}, nil...)
		for _, c := range t.Columns {
			keys = append(keys, t.Name+"."+c)
		}
		for i, k := range keys {
			v := new(big.Rat)
			if dest[i].Valid {
				if _, ok := v.SetString(dest[i].String); !ok {
					return nil, fmt.Errorf("%s: snapshot of %s: %q is not a number", p.dialect, k, dest[i].String)
				}
			}
			s[k] = v
		}
	}
	p.Tables = tables
	if p.shape != "" {
		p.since++
		s[p.shape] = new(big.Rat).SetInt64(p.since)
	}
	return s, nil
}

// changed records the first change of the schema's shape, naming table.
func (p *SnapshotPlan) changed(table string) {
	if p.shape == "" {
		p.shape = ShapeKey(p.Schema, table)
	}
}

// compareNames lists the schema's tables and records a change of shape
// when they are not the plan's, racetest's own left out.
func (p *SnapshotPlan) compareNames(ctx context.Context, q Querier) error {
	rows, err := q.Rows(ctx, tableNames[p.dialect])
	if err != nil {
		return fmt.Errorf("%s: listing the schema's tables for --effects auto: %w", p.dialect, err)
	}
	planned := map[string]bool{}
	for _, t := range p.Tables {
		planned[t.Name] = true
	}
	var now []string
	for _, r := range rows {
		if n := text(r[0]); !ownTable(n) {
			if !planned[n] {
				now = append(now, n)
			}
			delete(planned, n)
		}
	}
	for n := range planned {
		now = append(now, n)
	}
	if len(now) > 0 {
		sort.Strings(now)
		p.changed(now[0])
	}
	return nil
}

// reshaped reports whether a table whose read failed is gone, or its
// columns are no longer the plan's, by listing the schema again; a
// listing that fails too says nothing, and the read's error stands.
func (p *SnapshotPlan) reshaped(ctx context.Context, q Querier, t SnapshotTable) bool {
	l, err := readListing(ctx, p.dialect, q)
	if err != nil {
		return false
	}
	if now := l.byName[t.Name]; now != nil && slices.Equal(now.Columns, t.Columns) {
		return false
	}
	p.changed(t.Name)
	return true
}

// query is the statement that reads one table.
func (p *SnapshotPlan) query(t SnapshotTable) string {
	cols := []string{p.text("count(*)")}
	for _, c := range t.Columns {
		sum := "sum(" + p.quote(c) + ")"
		if t.Float[c] {
			sum = sqldialect.Pick(p.dialect, "round("+sum+", 6)", "round("+sum+"::numeric, 6)")
		}
		cols = append(cols, p.text(sum))
	}
	return "SELECT " + strings.Join(cols, ", ") + " FROM " + p.quote(t.Name)
}

func (p *SnapshotPlan) text(expr string) string {
	return sqldialect.Pick(p.dialect, "CAST("+expr+" AS CHAR)", expr+"::text")
}

func (p *SnapshotPlan) quote(name string) string {
	return p.dialect.QuoteIdent(name)
}

// text, integer and truth read a value of Query as either driver decodes it.
func text(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case []byte:
		return string(x)
	case string:
		return x
	}
	return fmt.Sprint(v)
}

func integer(v any) int64 {
	var n int64
	switch x := v.(type) {
	case int64:
		return x
	case int32:
		return int64(x)
	case float64:
		return int64(x)
	}
	fmt.Sscan(text(v), &n)
	return n
}

func truth(v any) bool {
	switch x := v.(type) {
	case bool:
		return x
	case int64:
		return x != 0
	}
	s := text(v)
	return s == "1" || s == "t" || s == "true"
}
