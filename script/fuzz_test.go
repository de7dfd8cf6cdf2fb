package script

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FuzzParse feeds arbitrary text to the script parser in each dialect: no
// input may panic; a script that parses has jumps inside itself, and runs
// to an outcome against a store that answers every statement with one row
// (v = 1), its steps taken forwards only (an \if chain never loops).
// Run it for real with: go test -run '^$' -fuzz '^FuzzParse$' ./script
func FuzzParse(f *testing.F) {
	for _, pattern := range []string{"*.sql", "*.redis", "*.mongo"} {
		names, _ := filepath.Glob(filepath.Join("..", "examples", "redeem", "scripts", pattern))
		for _, name := range names {
			if b, err := os.ReadFile(name); err == nil {
				f.Add(string(b), uint8(dialectOfExt(name)))
			}
		}
	}
	for _, s := range []string{
		naive,
		"SELECT 1 AS v \\gset\n\\if :v\nSELECT 'a';\n\\elif :v >= 2\nSELECT 'b';\n\\else\n\\decline no\n\\endif\n",
		"\\if :'v' = 'x''y'\n\\endif\n",
		"SELECT $$;$$, ';', \"a;b\" -- ;\n;\n/* ; */ SELECT 1;",
		"SET k{{.Token}} 1 NX\n\\if :reply = OK\n\\else\n\\decline taken\n\\endif\n",
		`{"insert": "c", "documents": [{"_id": "{{.Token}}"}]}`,
		"\\if {{.Burst}} < 3\n\\endif",
		"\\sleep 1ms\n",
		"\\if\n", "\\endif\n", "\\else\n\\else\n", "{{", "{{.Nope}}", "'", "\\gset",
	} {
		for d := range uint8(3) {
			f.Add(s, d)
		}
	}
	f.Fuzz(func(t *testing.T, src string, d uint8) {
		dialect := Dialect(d % 3)
		s, err := Parse("fuzz", src, dialect, ScopeAttempt, "--attempt")
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an empty error")
			}
			return
		}
		for i, st := range s.Steps {
			if (st.Kind == Branch || st.Kind == Jump) && (st.Else <= i || st.Else > len(s.Steps)) {
				t.Fatalf("step %d (%s) jumps to %d of %d: not forwards", i, st.Text, st.Else, len(s.Steps))
			}
			if st.Kind == Sleep {
				return // a deliberate gap: not run here
			}
		}
		fc := &fakeConn{answer: func(st Stmt) (Reply, error) {
			return Reply{Columns: []string{"v", "reply"}, Values: []string{"1", "OK"}, Rows: 1}, nil
		}}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		s.Start(fc, Data{RunID: "r", Token: "r-1", Burst: 1, Attempt: 2}, nil).Run(ctx, nil)
		if len(fc.sent) > s.Statements() {
			t.Fatalf("%d statements sent by a script of %d", len(fc.sent), s.Statements())
		}
	})
}

func dialectOfExt(name string) Dialect {
	switch filepath.Ext(name) {
	case ".redis":
		return Redis
	case ".mongo":
		return Mongo
	}
	return SQL
}
