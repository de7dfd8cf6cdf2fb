package sqlsnap

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/racetest/racetest/internal/sqldialect"
	"github.com/racetest/racetest/runner"
)

// The families, as the tests name them.
const (
	MySQL    = sqldialect.MySQL
	Postgres = sqldialect.Postgres
)

type Dialect = sqldialect.Dialect

// TestEveryDialectHasItsQueries fails when a family of sqldialect has no
// row in a table of this package: its snapshot would read nothing.
func TestEveryDialectHasItsQueries(t *testing.T) {
	for _, d := range sqldialect.Dialects {
		if listing[d] == "" || tableNames[d] == "" || len(numericTypes[d]) == 0 {
			t.Errorf("%s: a row missing in listing, tableNames or numericTypes", d)
		}
	}
	for name, n := range map[string]int{"listing": len(listing), "tableNames": len(tableNames), "numericTypes": len(numericTypes)} {
		if n != len(sqldialect.Dialects) {
			t.Errorf("%s has %d rows for %d dialects", name, n, len(sqldialect.Dialects))
		}
	}
}

func TestPlanRefusesAnUnknownDialect(t *testing.T) {
	q := &fakeQuerier{listing: [][]any{{"t", "v", "int", int64(0), int64(1), nil}}}
	_, err := Plan(context.Background(), sqldialect.Dialect("sqlite"), q, nil, DefaultLimits)
	if err == nil || !strings.Contains(err.Error(), `"sqlite"`) {
		t.Fatalf("Plan on an unknown dialect: %v, want an error naming it", err)
	}
	if len(q.queries) != 0 {
		t.Errorf("it asked the server %q", q.queries)
	}
}

// fakeQuerier answers the listing with rows a test gives, and each table's
// statement with the values a test gives for it: what a server would,
// without one, so that every rule of the plan and the read is pinned here
// (the servers' own answers are tested in internal/sqldb).
type fakeQuerier struct {
	listing [][]any
	listErr error
	// row answers a table's statement: its values in order (nil: NULL).
	row     map[string][]any
	rowErr  error
	queries []string
}

func (f *fakeQuerier) Rows(_ context.Context, query string) ([][]any, error) {
	f.queries = append(f.queries, query)
	if query == tableNames[Postgres] || query == tableNames[MySQL] {
		// The names of the listing's tables, once each.
		var names [][]any
		seen := map[string]bool{}
		for _, r := range f.listing {
			if n := text(r[0]); !seen[n] {
				seen[n] = true
				names = append(names, []any{n})
			}
		}
		return names, f.listErr
	}
	return f.listing, f.listErr
}

func (f *fakeQuerier) Row(_ context.Context, query string, dest ...any) error {
	f.queries = append(f.queries, query)
	if f.rowErr != nil {
		return f.rowErr
	}
	if f.listing != nil && !f.lists(query) {
		return errors.New("fake: relation does not exist")
	}
	var vals []any
	for table, v := range f.row {
		if strings.HasSuffix(query, " FROM "+table) {
			vals = v
		}
	}
	if len(vals) != len(dest) {
		return fmt.Errorf("fake: %d values for %d columns of %q", len(vals), len(dest), query)
	}
	for i, v := range vals {
		ns := dest[i].(*sql.NullString)
		if v != nil {
			*ns = sql.NullString{String: fmt.Sprint(v), Valid: true}
		}
	}
	return nil
}

// lists reports whether the table a statement reads is in the listing.
func (f *fakeQuerier) lists(query string) bool {
	for _, r := range f.listing {
		n := text(r[0])
		if strings.HasSuffix(query, ` FROM "`+n+`"`) || strings.HasSuffix(query, " FROM `"+n+"`") {
			return true
		}
	}
	return false
}

// col is one row of the listing: table, column, type, key, size, schema.
func col(table, column, typ string, key any, size any) []any {
	return []any{table, column, typ, key, size, "app"}
}

func TestPlanWatchesEveryTableButTheRegistry(t *testing.T) {
	q := &fakeQuerier{listing: [][]any{
		col("stock", "id", "integer", true, int64(8192)),
		col("stock", "qty", "integer", false, int64(8192)),
		col("stock", "price", "numeric", false, int64(8192)),
		col("stock", "score", "double precision", false, int64(8192)),
		col("stock", "name", "character varying", false, int64(8192)),
		col("stock", "cash", "money", false, int64(8192)),
		col("grants", "", "", nil, []byte("100")),
		col(RegistryTable, "n", "integer", false, int64(1<<30)),
	}}
	p, err := Plan(context.Background(), Postgres, q, nil, DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	if q.queries[0] != listing[Postgres] {
		t.Errorf("listed with %q, want the dialect's listing", q.queries[0])
	}
	if p.Schema != "app" {
		t.Errorf("schema %q, want app", p.Schema)
	}
	var got []string
	for _, tb := range p.Tables {
		got = append(got, tb.Name+"("+strings.Join(tb.Columns, ",")+")")
	}
	// Keys and identities name rows, text and money are not summed, the
	// registry is racetest's own: never watched, and its size not counted.
	if g := strings.Join(got, " "); g != "stock(qty,price,score) grants()" {
		t.Errorf("tables %s, want stock(qty,price,score) grants()", g)
	}
	if p.Bytes != 8192+100 {
		t.Errorf("bytes %d, want %d (each table's size once, the registry's not)", p.Bytes, 8192+100)
	}
	fl := p.Tables[0].Float
	if !fl["score"] || fl["qty"] || fl["price"] {
		t.Errorf("float columns %v, want score alone", fl)
	}
}

func TestPlanWithoutASchemaNamesIt(t *testing.T) {
	q := &fakeQuerier{listing: [][]any{{"t", "v", "int", int64(0), int64(1), nil}}}
	p, err := Plan(context.Background(), MySQL, q, nil, DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	if p.Schema != "(the connection's, empty)" {
		t.Errorf("schema %q", p.Schema)
	}
	if len(p.Tables) != 1 || len(p.Tables[0].Columns) != 1 {
		t.Errorf("tables %+v: MySQL's int, not a key (0), is summed", p.Tables)
	}
}

func TestPlanListingErrorSaysWhat(t *testing.T) {
	q := &fakeQuerier{listErr: errors.New("permission denied")}
	_, err := Plan(context.Background(), MySQL, q, nil, DefaultLimits)
	if err == nil || !strings.Contains(err.Error(), "listing the schema's tables for --effects auto: permission denied") {
		t.Fatalf("error %v", err)
	}
}

func TestPlanWatchPicksTheNamedTables(t *testing.T) {
	listing := [][]any{
		col("Orders", "n", "integer", false, int64(10)),
		col("orders", "n", "integer", false, int64(20)),
		col("stock", "qty", "integer", false, int64(40)),
		col("audit", "n", "integer", false, int64(80)),
	}
	for _, c := range []struct {
		watch []string
		want  string
		bytes int64
	}{
		{[]string{"orders"}, "orders", 20},               // the exact name over one of another case
		{[]string{"Orders"}, "Orders", 10},               // and the other way
		{[]string{"STOCK"}, "stock", 40},                 // else ignoring case
		{[]string{"stock", "AUDIT"}, "audit stock", 120}, // sorted
		{[]string{"stock", "stock"}, "stock", 40},        // once
	} {
		p, err := Plan(context.Background(), Postgres, &fakeQuerier{listing: listing}, c.watch, DefaultLimits)
		if err != nil {
			t.Fatalf("%v: %v", c.watch, err)
		}
		var got []string
		for _, tb := range p.Tables {
			got = append(got, tb.Name)
		}
		if g := strings.Join(got, " "); g != c.want || p.Bytes != c.bytes {
			t.Errorf("--watch %v: tables %q (%d bytes), want %q (%d bytes)", c.watch, g, p.Bytes, c.want, c.bytes)
		}
	}
}

func TestPlanWatchOfAMissingTable(t *testing.T) {
	_, err := Plan(context.Background(), Postgres, &fakeQuerier{listing: [][]any{col("stock", "qty", "integer", false, int64(1))}}, []string{"orders"}, DefaultLimits)
	var se *runner.SnapshotError
	if !errors.As(err, &se) || se.Msg != `--watch: no table "orders" in schema app (its tables: stock)` {
		t.Fatalf("error %v", err)
	}
	_, err = Plan(context.Background(), Postgres, &fakeQuerier{}, []string{"orders"}, DefaultLimits)
	if err == nil || !strings.Contains(err.Error(), "(its tables: none)") {
		t.Fatalf("error %v, want its tables: none", err)
	}
}

func TestPlanLimits(t *testing.T) {
	listing := [][]any{
		col("a", "n", "integer", false, int64(100)),
		col("b", "n", "integer", false, int64(200)),
	}
	plan := func(lim Limits, watch ...string) error {
		_, err := Plan(context.Background(), Postgres, &fakeQuerier{listing: listing}, watch, lim)
		return err
	}
	// At the limits, a plan is made; one past either, it is refused with
	// the way out.
	if err := plan(Limits{Tables: 2, Bytes: 300}); err != nil {
		t.Errorf("at the limits: %v", err)
	}
	var se *runner.SnapshotError
	if err := plan(Limits{Tables: 1, Bytes: 300}); !errors.As(err, &se) || !strings.Contains(se.Msg, "schema app has 2 tables, more than the 1 a snapshot reads per burst — name the tables the attempt writes with --watch") {
		t.Errorf("one table too many: %v", err)
	}
	if err := plan(Limits{Tables: 2, Bytes: 299}); !errors.As(err, &se) || !strings.Contains(se.Msg, "the watched tables of schema app hold 0 MiB, more than the 0 MiB") {
		t.Errorf("one byte too many: %v", err)
	}
	// --watch counts only what it watches.
	if err := plan(Limits{Tables: 1, Bytes: 200}, "b"); err != nil {
		t.Errorf("watching b alone: %v", err)
	}
	if err := plan(Limits{Tables: 1, Bytes: 199}, "b"); err == nil {
		t.Errorf("watching b alone, one byte under its size: no error")
	}
	if DefaultLimits != (Limits{100, 256 << 20}) {
		t.Errorf("default limits %+v, want 100 tables and 256 MiB (docs/measurements.md)", DefaultLimits)
	}
}

func TestReadSumsEachTableInOneStatement(t *testing.T) {
	for _, c := range []struct {
		d    Dialect
		want string
	}{
		{Postgres, `SELECT count(*)::text, sum("qty")::text, round(sum("sc""ore")::numeric, 6)::text FROM "st""ock"`},
		{MySQL, "SELECT CAST(count(*) AS CHAR), CAST(sum(`qty`) AS CHAR), CAST(round(sum(`sc\"ore`), 6) AS CHAR) FROM `st\"ock`"},
	} {
		t.Run(string(c.d), func(t *testing.T) {
			p := &SnapshotPlan{dialect: c.d, watched: true, Tables: []SnapshotTable{
				{Name: `st"ock`, Columns: []string{"qty", `sc"ore`}, Float: map[string]bool{`sc"ore`: true}},
			}}
			q := &fakeQuerier{row: map[string][]any{}}
			q.row[p.quote(`st"ock`)] = []any{"3", nil, "1.500000"}
			s, err := p.Read(context.Background(), q)
			if err != nil {
				t.Fatal(err)
			}
			if len(q.queries) != 1 || q.queries[0] != c.want {
				t.Errorf("queries %q, want [%q]", q.queries, c.want)
			}
			want := map[string]string{`st"ock` + runner.RowsSuffix: "3", `st"ock.qty`: "0", `st"ock.sc"ore`: "3/2"}
			if len(s) != len(want) {
				t.Errorf("snapshot %v, want %v", s, want)
			}
			for k, v := range want {
				if s[k] == nil || s[k].RatString() != v {
					t.Errorf("%s = %v, want %s (a NULL sum is 0)", k, s[k], v)
				}
			}
		})
	}
}

func TestReadQuotesPerDialect(t *testing.T) {
	pg, my := &SnapshotPlan{dialect: Postgres}, &SnapshotPlan{dialect: MySQL}
	if got := pg.quote(`a"b`); got != `"a""b"` {
		t.Errorf("PostgreSQL quote %s", got)
	}
	if got := my.quote("a`b"); got != "`a``b`" {
		t.Errorf("MySQL quote %s", got)
	}
	if got := pg.query(SnapshotTable{Name: "t", Columns: []string{"f"}, Float: map[string]bool{}}); got != `SELECT count(*)::text, sum("f")::text FROM "t"` {
		t.Errorf("an integer column is summed exactly, not rounded: %s", got)
	}
}

func TestReadErrors(t *testing.T) {
	p := &SnapshotPlan{dialect: Postgres, watched: true, Tables: []SnapshotTable{{Name: "t", Columns: []string{"v"}}}}
	// The table is there, with the plan's columns: the read's error
	// stands; and so it does when the schema cannot be listed again.
	listed := [][]any{col("t", "v", "integer", false, int64(1))}
	for _, q := range []*fakeQuerier{{listing: listed, rowErr: errors.New("permission denied")}, {listErr: errors.New("gone away"), rowErr: errors.New("permission denied")}} {
		_, err := p.Read(context.Background(), q)
		if err == nil || err.Error() != "postgres: snapshot of t: permission denied" {
			t.Errorf("error %v", err)
		}
		if len(p.Tables) != 1 || p.shape != "" {
			t.Errorf("a read that failed on a table that is there changed the plan: %+v", p)
		}
	}
	var err error
	q := &fakeQuerier{row: map[string][]any{`"t"`: {"1", "abc"}}}
	_, err = p.Read(context.Background(), q)
	if err == nil || err.Error() != `postgres: snapshot of t.v: "abc" is not a number` {
		t.Errorf("error %v", err)
	}
}

func TestDriverValues(t *testing.T) {
	for _, c := range []struct {
		v    any
		text string
		n    int64
		tr   bool
	}{
		{nil, "", 0, false},
		{[]byte("12"), "12", 12, false},
		{"7", "7", 7, false},
		{int64(5), "5", 5, true},
		{int64(0), "0", 0, false},
		{int32(6), "6", 6, false},
		{float64(9.7), "9.7", 9, false},
		{true, "true", 0, true},
		{false, "false", 0, false},
		{"1", "1", 1, true},
		{"t", "t", 0, true},
		{"true", "true", 0, true},
		{[]byte("f"), "f", 0, false},
	} {
		if got := text(c.v); got != c.text {
			t.Errorf("text(%#v) = %q, want %q", c.v, got, c.text)
		}
		if got := integer(c.v); got != c.n {
			t.Errorf("integer(%#v) = %d, want %d", c.v, got, c.n)
		}
		if got := truth(c.v); got != c.tr {
			t.Errorf("truth(%#v) = %v, want %v", c.v, got, c.tr)
		}
	}
}

// Without --watch, racetest's own tables (the registry, this run's and
// other runs', which come and go on a shared database) are not read; a
// table named by --watch is, whatever its name.
func TestPlanLeavesOutRunsTables(t *testing.T) {
	listing := [][]any{
		col("orders", "n", "integer", false, int64(10)),
		col("racetest_fd06a480_effects", "n", "integer", false, int64(20)),
		col(RegistryTable, "n", "integer", false, int64(40)),
	}
	for _, c := range []struct {
		watch []string
		want  string
		bytes int64
	}{
		{nil, "orders", 10},
		{[]string{"racetest_fd06a480_effects"}, "racetest_fd06a480_effects", 20},
	} {
		p, err := Plan(context.Background(), Postgres, &fakeQuerier{listing: listing}, c.watch, DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, tb := range p.Tables {
			got = append(got, tb.Name)
		}
		if g := strings.Join(got, " "); g != c.want || p.Bytes != c.bytes {
			t.Errorf("--watch %v: tables %q (%d bytes), want %q (%d bytes)", c.watch, g, p.Bytes, c.want, c.bytes)
		}
	}
}

// A table of the schema that is created or dropped during a run is
// another writer's: no read fails on it, and from then on every snapshot
// differs from the one before by ShapeKey, so that no burst after it can
// be put down to its attempts. Tables of racetest's runs come and go
// unseen.
func TestReadTablesThatComeAndGo(t *testing.T) {
	for _, c := range []struct {
		name  string
		watch []string
		// then is the listing after the plan was made.
		then  [][]any
		table string // the table ShapeKey names, "" for no change
	}{
		{"unchanged", nil, [][]any{col("orders", "n", "integer", false, 1), col("audit", "n", "integer", false, 1)}, ""},
		{"a run's table", nil, [][]any{col("orders", "n", "integer", false, 1), col("audit", "n", "integer", false, 1), col("racetest_ab_x", "n", "integer", false, 1)}, ""},
		{"dropped", nil, [][]any{col("orders", "n", "integer", false, 1)}, "audit"},
		{"created", nil, [][]any{col("orders", "n", "integer", false, 1), col("audit", "n", "integer", false, 1), col("b_new", "n", "integer", false, 1)}, "b_new"},
		{"watched, created", []string{"orders", "audit"}, [][]any{col("orders", "n", "integer", false, 1), col("audit", "n", "integer", false, 1), col("b_new", "n", "integer", false, 1)}, ""},
		{"watched, dropped", []string{"orders", "audit"}, [][]any{col("orders", "n", "integer", false, 1)}, "audit"},
		{"watched, altered", []string{"orders", "audit"}, [][]any{col("orders", "n", "integer", false, 1), col("audit", "m", "integer", false, 1)}, "audit"},
	} {
		t.Run(c.name, func(t *testing.T) {
			q := &fakeQuerier{listing: [][]any{col("orders", "n", "integer", false, 1), col("audit", "n", "integer", false, 1)}}
			p, err := Plan(context.Background(), Postgres, q, c.watch, DefaultLimits)
			if err != nil {
				t.Fatal(err)
			}
			q.listing = c.then
			q.row = map[string][]any{`"orders"`: {"2", "5"}, `"audit"`: {"1", "1"}}
			if c.name == "watched, altered" {
				// The plan's column is gone: its read fails.
				q.row[`"audit"`] = []any{"1"}
			}
			key := ShapeKey("app", c.table)
			for i := int64(1); i <= 3; i++ {
				s, err := p.Read(context.Background(), q)
				if err != nil {
					t.Fatalf("read %d: %v", i, err)
				}
				if s["orders"+runner.RowsSuffix].RatString() != "2" {
					t.Errorf("read %d: orders rows %v", i, s["orders"+runner.RowsSuffix])
				}
				if c.table == "" {
					if len(s) != 4 {
						t.Errorf("read %d: snapshot %v, want orders' and audit's rows and sums alone", i, s)
					}
					continue
				}
				if s[key] == nil || s[key].RatString() != fmt.Sprint(i) {
					t.Errorf("read %d: %q = %v, want %d (one more at each read)", i, key, s[key], i)
				}
			}
		})
	}
	if got := ShapeKey("test", "orders"); got != "tables created or dropped in test: orders" {
		t.Errorf("ShapeKey %q", got)
	}
}

// --watch names columns too: TABLE.COLUMN compares only the columns so
// named of its table, -TABLE.COLUMN sets one aside (a lock wait logged in
// seconds, a value that depends on timing under concurrency); the report
// names what was set aside, and a column the snapshot does not sum is
// refused with the columns it does.
func TestPlanWatchesColumns(t *testing.T) {
	listing := [][]any{
		col("orders", "id", "integer", true, int64(1)),
		col("orders", "qty", "integer", false, int64(1)),
		col("orders", "price", "numeric", false, int64(1)),
		col("audit", "n", "integer", false, int64(1)),
		col("audit", "waited", "integer", false, int64(1)),
		col("other", "x", "integer", false, int64(1)),
	}
	plan := func(watch ...string) (string, []string, error) {
		p, err := Plan(context.Background(), Postgres, &fakeQuerier{listing: listing}, watch, DefaultLimits)
		if err != nil {
			return "", nil, err
		}
		var got []string
		for _, tb := range p.Tables {
			got = append(got, tb.Name+"("+strings.Join(tb.Columns, ",")+")")
		}
		return strings.Join(got, " "), p.Notes(), nil
	}
	cases := []struct {
		watch []string
		want  string
		aside string
	}{
		{[]string{"orders.qty", "audit"}, "audit(n,waited) orders(qty)", "orders.price"},
		{[]string{"orders", "audit", "-audit.waited"}, "audit(n) orders(qty,price)", "audit.waited"},
		{[]string{"Orders.QTY", "orders.price"}, "orders(qty,price)", ""},
		// Only a column set aside: every table, as without --watch.
		{[]string{"-audit.waited"}, "orders(qty,price) audit(n) other(x)", "audit.waited"},
	}
	for _, c := range cases {
		got, notes, err := plan(c.watch...)
		if err != nil {
			t.Errorf("%v: %v", c.watch, err)
			continue
		}
		if got != c.want {
			t.Errorf("%v: %s, want %s", c.watch, got, c.want)
		}
		note := strings.Join(notes, "\n")
		if c.aside == "" && note != "" || c.aside != "" && note != "not compared (set aside by --watch): "+c.aside+"; each table's rows still are" {
			t.Errorf("%v: notes %q, want %s set aside", c.watch, note, c.aside)
		}
	}
	for _, bad := range []struct {
		watch []string
		want  string
	}{
		{[]string{"orders.id"}, `--watch orders.id: orders has no column "id" whose sum a snapshot compares (its numeric columns that are not keys: qty, price)`},
		{[]string{"orders.note"}, `has no column "note"`},
		{[]string{"-audit"}, "a leading '-' sets a column aside: give TABLE.COLUMN (-audit.COLUMN)"},
		{[]string{"a.b.c"}, "want TABLE, TABLE.COLUMN"},
		{[]string{".qty"}, "want TABLE, TABLE.COLUMN"},
		{[]string{"orders", "-nosuch.x"}, `--watch -nosuch.x: no table "nosuch" among those the snapshot reads (orders)`},
	} {
		_, _, err := plan(bad.watch...)
		var se *runner.SnapshotError
		if !errors.As(err, &se) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%v: %v, want a SnapshotError saying %q", bad.watch, err, bad.want)
		}
	}
	var nilPlan *SnapshotPlan
	if nilPlan.Notes() != nil {
		t.Error("a plan never made has notes")
	}
}
