package mysqlstore

import "testing"

func TestOptionsAllowList(t *testing.T) {
	for _, e := range []string{"", "InnoDB", "myisam", "ARIA"} {
		if _, err := EngineName(e); err != nil {
			t.Errorf("EngineName(%q): %v", e, err)
		}
	}
	for _, e := range []string{"MEMORY", "InnoDB; DROP TABLE x", "myisam "} {
		if _, err := EngineName(e); err == nil {
			t.Errorf("EngineName(%q) accepted", e)
		}
	}
	for in, want := range map[string]string{"": "", "read-committed": "READ COMMITTED", "REPEATABLE_READ": "REPEATABLE READ", "serializable": "SERIALIZABLE"} {
		if got, err := IsolationLevel(in); err != nil || got != want {
			t.Errorf("IsolationLevel(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := IsolationLevel("snapshot"); err == nil {
		t.Error(`IsolationLevel("snapshot") accepted`)
	}
}

const secret = "s3cr3t-pa55"
