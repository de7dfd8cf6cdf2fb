package sqldb

import (
	"errors"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/racetest/racetest/runner"
)

const secret = "s3cr3t-pa55"

func TestConfigAcceptsBothForms(t *testing.T) {
	for _, tc := range []struct {
		conn                     string
		user, pass, addr, dbname string
	}{
		{"", "root", "", "127.0.0.1:3306", "test"},
		{"app:" + secret + "@tcp(db.internal:3307)/shop?charset=utf8mb4", "app", secret, "db.internal:3307", "shop"},
		{"mysql://app:" + secret + "@db.internal:3307/shop?charset=utf8mb4", "app", secret, "db.internal:3307", "shop"},
		{"mysql://root@localhost/test", "root", "", "localhost:3306", "test"},
		{"mariadb://u:p%2Fq@[::1]:3306/x", "u", "p/q", "[::1]:3306", "x"},
	} {
		cfg, err := MySQLConfig(tc.conn)
		if err != nil {
			t.Errorf("MySQLConfig(%q): %v", RedactMySQL(tc.conn), err)
			continue
		}
		if cfg.User != tc.user || cfg.Passwd != tc.pass || cfg.Addr != tc.addr || cfg.DBName != tc.dbname {
			t.Errorf("MySQLConfig(%q) = user %q addr %q db %q, want %q %q %q", RedactMySQL(tc.conn), cfg.User, cfg.Addr, cfg.DBName, tc.user, tc.addr, tc.dbname)
		}
		// Settings racetest depends on, whatever the user wrote.
		if !cfg.ParseTime || cfg.ClientFoundRows || !cfg.InterpolateParams || cfg.Timeout != MySQLDialTimeout {
			t.Errorf("MySQLConfig(%q): parseTime=%v clientFoundRows=%v interpolateParams=%v timeout=%s",
				RedactMySQL(tc.conn), cfg.ParseTime, cfg.ClientFoundRows, cfg.InterpolateParams, cfg.Timeout)
		}
	}
}

func TestConfigForcesChangedRows(t *testing.T) {
	cfg, err := MySQLConfig("root@tcp(127.0.0.1:3306)/test?clientFoundRows=true&timeout=1s")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ClientFoundRows {
		t.Error("clientFoundRows=true survived: a conditional update would count matched rows as changed")
	}
	if cfg.Timeout.String() != "1s" {
		t.Errorf("the user's timeout=1s was replaced by %s", cfg.Timeout)
	}
}

func TestConfigErrorsHidePassword(t *testing.T) {
	for _, conn := range []string{
		"app:" + secret + "@tcp(db:3306",                // no slash
		"app:" + secret + "@tcp(db:3306)/x?timeout=bad", // bad parameter
		"mysql://app:" + secret + "@db:port/x",          // bad port
		"mysql://app:" + secret + "@db:3306/x?timeout=bad",
		"mysql://app:" + secret + "@db:3306", // no database
		"app:" + secret + "@tcp(db:3306)/",   // no database
	} {
		_, err := MySQLConfig(conn)
		if err == nil {
			t.Errorf("MySQLConfig(%q) accepted it", RedactMySQL(conn))
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error shows the password: %v", err)
		}
	}
}

func TestRedact(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"root@tcp(127.0.0.1:3306)/test", "root@tcp(127.0.0.1:3306)/test"},
		{"app:" + secret + "@tcp(db:3306)/shop", "app:xxxxx@tcp(db:3306)/shop"},
		{"app:p@ss/w:rd@tcp(db:3306)/shop?x=1", "app:xxxxx@tcp(db:3306)/shop?x=1"},
		{"mysql://app:" + secret + "@db:3306/shop", "mysql://app:xxxxx@db:3306/shop"},
		{"mysql://app@db/shop", "mysql://app@db/shop"},
		{"mysql://app:" + secret + "@db:port/shop", "mysql://app:xxxxx@db:port/shop"},
	} {
		if got := RedactMySQL(tc.in); got != tc.want {
			t.Errorf("RedactMySQL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestParseVersion(t *testing.T) {
	for raw, want := range map[string]string{
		"10.11.19-MariaDB-0+deb12u1": "MariaDB 10.11.19",
		"5.5.5-10.6.12-MariaDB":      "MariaDB 10.6.12",
		"11.4.2-MariaDB-ubu2404":     "MariaDB 11.4.2",
		"8.0.36":                     "MySQL 8.0.36",
		"8.4.0-0ubuntu0.24.04.1":     "MySQL 8.4.0",
		"8.0.11-TiDB-v7.5.1":         "TiDB 7.5.1",
	} {
		if got := ParseMySQLVersion(raw).String(); got != want {
			t.Errorf("ParseMySQLVersion(%q) = %q, want %q", raw, got, want)
		}
	}
	if ParseMySQLVersion("10.11.19-MariaDB").StoredColumn() != "PERSISTENT" || ParseMySQLVersion("8.0.36").StoredColumn() != "STORED" {
		t.Error("generated-column keyword does not follow the server flavour")
	}
}

func TestClassify(t *testing.T) {
	state := func(s string) (b [5]byte) { copy(b[:], s); return b }
	for _, tc := range []struct {
		err    error
		insert bool
		want   runner.Class
	}{
		{&mysql.MySQLError{Number: 1062, SQLState: state("23000")}, true, runner.Declined},
		{&mysql.MySQLError{Number: 1062, SQLState: state("23000")}, false, runner.Error},
		{&mysql.MySQLError{Number: 1213, SQLState: state("40001")}, true, runner.Conflict},
		{&mysql.MySQLError{Number: 1020}, false, runner.Conflict},
		{&mysql.MySQLError{Number: 1406, SQLState: state("22001")}, true, runner.Error},
		{&mysql.MySQLError{Number: 1146, SQLState: state("42S02")}, true, runner.Error},
		{&mysql.MySQLError{Number: 1205, SQLState: state("HY000")}, true, runner.Error},
		{mysql.ErrInvalidConn, true, runner.Error},
		{errors.New("anything else"), true, runner.Error},
	} {
		o := Classify(tc.err)
		if tc.insert {
			o = ClassifyInsert(tc.err)
		}
		if o.Class != tc.want {
			t.Errorf("classify(%v, insert=%v) = %s, want %s", tc.err, tc.insert, o.Class, tc.want)
		}
	}
}

func TestConnectErrorMessages(t *testing.T) {
	cfg, err := MySQLConfig("app:" + secret + "@tcp(db:3306)/shop")
	if err != nil {
		t.Fatal(err)
	}
	limit := func(v string) string { return "151" }
	for _, tc := range []struct {
		err  error
		want []string
	}{
		{&mysql.MySQLError{Number: 1040, Message: "Too many connections"}, []string{"too many connections", "@@max_connections = 151", "fewer --attempts", "SET GLOBAL max_connections", "holds 202 at once"}},
		{&mysql.MySQLError{Number: 1045, Message: "Access denied for user 'app'@'x' (using password: YES)"}, []string{"wrong user or password", `"app"`, "db:3306", "--mysql-dsn"}},
		{&mysql.MySQLError{Number: 1049, Message: "Unknown database 'shop'"}, []string{`database "shop" does not exist`, "CREATE DATABASE"}},
	} {
		msg := ExplainMySQL(cfg, tc.err, limit, 202).Error()
		for _, w := range tc.want {
			if !strings.Contains(msg, w) {
				t.Errorf("message %q lacks %q", msg, w)
			}
		}
		if strings.Contains(msg, secret) || strings.Contains(msg, "\n") {
			t.Errorf("message is not one redacted line: %q", msg)
		}
		if !errors.Is(ExplainMySQL(cfg, tc.err, limit, 202), tc.err) {
			t.Errorf("connect error does not wrap %v", tc.err)
		}
	}
}
