package script

import (
	"context"
	"slices"
	"testing"

	"github.com/racetest/racetest/scenarios"
)

// Every dialect in the list is whole: a new one missing a rule fails
// here, not at its first script.
func TestEveryDialectIsWhole(t *testing.T) {
	seen := map[string]bool{}
	for _, d := range dialects {
		l := d.lang
		if d.backend == "" || d.open == nil || l == nil {
			t.Fatalf("dialect %+v: a backend, an opener and a language are required", d)
		}
		if seen[d.backend] {
			t.Errorf("backend %s is listed twice", d.backend)
		}
		seen[d.backend] = true
		if l.name == "" || l.unit == "" || l.split == nil || l.tx == nil || l.stmt == nil || l.gset == nil || l.count == nil || l.readOnly == nil {
			t.Errorf("%s: the %q language misses a rule", d.backend, l.name)
		}
		if got, ok := DialectOf(d.backend); !ok || got != l.id || languageOf(got) != l {
			t.Errorf("DialectOf(%s) = %v, %v; want %v", d.backend, got, ok, l.id)
		}
	}
}

// What cmd and suite read of the list: the backends of each language, the
// first the default, and the languages' names.
func TestBackendsOfEachDialect(t *testing.T) {
	want := map[Dialect][]string{SQL: {"postgres", "mysql"}, Redis: {"redis"}, Mongo: {"mongo"}}
	for d, bs := range want {
		if !slices.Equal(Backends[d], bs) {
			t.Errorf("Backends[%v] = %v, want %v", d, Backends[d], bs)
		}
	}
	if len(Backends) != len(want) {
		t.Errorf("Backends = %v, want %v", Backends, want)
	}
	for d, name := range map[Dialect]string{SQL: "sql", Redis: "redis", Mongo: "mongo", Dialect(99): "sql"} {
		if d.String() != name {
			t.Errorf("Dialect(%d) = %q, want %q", d, d.String(), name)
		}
	}
	if _, ok := DialectOf("memory"); ok {
		t.Error("DialectOf(memory): scripts do not run on it")
	}
}

func TestOpenNamesTheBackendsScriptsRunOn(t *testing.T) {
	_, err := Open(context.Background(), "memory", scenarios.Params{})
	if err == nil || err.Error() != `scripts run on postgres, mysql, redis or mongo, not "memory"` {
		t.Errorf("Open(memory) = %v", err)
	}
}
