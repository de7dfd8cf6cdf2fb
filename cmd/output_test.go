package cmd

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/racetest/racetest/report"
)

const tinySuite = "cases:\n  - {scenario: unique-insert, attempts: 2, bursts: 2}\n"

// A report never overwrites an input, nor another report.
func TestSuiteRefusesAnOutputThatIsAnInput(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "my.yaml")
	if err := os.WriteFile(file, []byte(tinySuite), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.yaml")
	if err := os.Link(file, link); err != nil {
		t.Fatal(err)
	}
	sym := filepath.Join(dir, "sym.yaml")
	if err := os.Symlink(file, sym); err != nil {
		t.Fatal(err)
	}
	body := filepath.Join(dir, "body.json")
	if err := os.WriteFile(body, []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}
	httpSuite := filepath.Join(dir, "http.yaml")
	if err := os.WriteFile(httpSuite, []byte("cases:\n  - name: h\n    http: {url: 'http://127.0.0.1:9/x', body_file: body.json, success: {status: [2xx]}, effects: 'http:http://127.0.0.1:9/n'}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{file, "--json", file}, "--json " + file + ": that is the suite file"},
		{[]string{file, "--junit", filepath.Join(dir, ".", "..", filepath.Base(dir), "my.yaml")}, "that is the suite file"},
		{[]string{file, "--markdown", link}, "that is the suite file"},
		{[]string{sym, "--json", file}, "that is the suite file"},
		{[]string{file, "--json", out, "--junit", out}, "--junit and --json both name " + out},
		{[]string{file, "--markdown", out, "--json", filepath.Join(dir, "x", "..", "out")}, "--markdown and --json both name"},
		{[]string{httpSuite, "--json", body}, `that is the body_file of case "h"`},
	} {
		_, errOut, code := execSuite(t, memoryOnly(), nil, append([]string{"suite"}, c.args...)...)
		if code != exitUsage || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, want 2 and %q:\n%s", c.args, code, c.want, errOut)
		}
	}
	if b, _ := os.ReadFile(file); string(b) != tinySuite {
		t.Errorf("the suite was overwritten:\n%s", b)
	}
	if b, _ := os.ReadFile(body); string(b) != `{}` {
		t.Errorf("the body file was overwritten:\n%s", b)
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("a refused run wrote %s", out)
	}
}

// A report that fails half-way leaves the previous report whole, and no
// temporary file behind; one that succeeds replaces it, keeping its mode.
func TestWriteReportReplacesWholeOrNotAtAll(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "r.json")
	if err := os.WriteFile(file, []byte("previous"), 0o640); err != nil {
		t.Fatal(err)
	}
	failing := func(w io.Writer, _ []report.Case, _ report.Options) error {
		io.WriteString(w, "half a rep")
		return errors.New("disk full")
	}
	if err := writeReport(file, failing, nil, report.Options{}); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("writeReport = %v", err)
	}
	if b, _ := os.ReadFile(file); string(b) != "previous" {
		t.Errorf("after a failed write the file holds %q", b)
	}
	ok := func(w io.Writer, _ []report.Case, _ report.Options) error {
		_, err := io.WriteString(w, "new report")
		return err
	}
	if err := writeReport(file, ok, nil, report.Options{}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(file); string(b) != "new report" {
		t.Errorf("after a write the file holds %q", b)
	}
	if st, _ := os.Stat(file); st.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, want 0640 as before", st.Mode().Perm())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("the directory holds %d files, want only r.json: %v", len(entries), entries)
	}
}

// Ctrl-C is honoured while the suite is read: here, a standard input that
// never ends.
func TestSuiteInterruptedWhileReading(t *testing.T) {
	io, _, errOut := testStreams()
	pr, pw := ioPipe()
	defer pw.Close()
	io.In = pr
	root := newCmdRoot(&factory{IO: io, Registry: memoryOnly()})
	root.SetArgs([]string{"suite", "-"})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	select {
	case err := <-done:
		if code := exitCode(err); code != exitInterrupted {
			t.Errorf("exit %d, want %d (%v)\n%s", code, exitInterrupted, err, errOut)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Ctrl-C did not stop racetest suite while it read standard input")
	}
}

func ioPipe() (*os.File, *os.File) {
	r, w, err := os.Pipe()
	if err != nil {
		panic(err)
	}
	return r, w
}

// TestAnOutputThatIsTwoInputsNamesTheFirst: two cases that send the same
// body file, and a report asked to overwrite it: the refusal names the
// first case in the file, every time (a map of inputs named either).
func TestAnOutputThatIsTwoInputsNamesTheFirst(t *testing.T) {
	dir := t.TempDir()
	body := filepath.Join(dir, "body.json")
	if err := os.WriteFile(body, []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "two.yaml")
	c := "    http: {url: 'http://127.0.0.1:9/x', body_file: body.json, success: {status: [2xx]}, effects: 'http:http://127.0.0.1:9/n'}\n"
	if err := os.WriteFile(file, []byte("cases:\n  - name: first\n"+c+"  - name: second\n"+c), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 12; i++ {
		_, errOut, code := execSuite(t, memoryOnly(), nil, "suite", file, "--json", body)
		if code != exitUsage || !strings.Contains(errOut, `that is the body_file of case "first"`) {
			t.Fatalf("run %d: exit %d, want 2 naming the first case:\n%s", i+1, code, errOut)
		}
	}
}
