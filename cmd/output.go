package cmd

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/racetest/racetest/report"
)

// output is a report file a command was asked to write.
type output struct {
	flag, file string
}

// input is a file a command reads, and what it is to the user.
type input struct {
	what, file string
}

// checkOutputs refuses, before anything runs, an output that is one of the
// inputs or that another output also names: a report written there would
// destroy the suite, or the other report. Paths are compared after
// cleaning, and by file identity where the file exists (a hard link, a
// symbolic link or ../dir/x naming the same file).
func checkOutputs(inputs []input, outs []output) error {
	for i, o := range outs {
		if o.file == "" {
			continue
		}
		if err := checkWritable(o.file); err != nil {
			return usageErrorf("%s %s: %v", o.flag, o.file, err)
		}
		for _, in := range inputs {
			if samePath(o.file, in.file) {
				return usageErrorf("%s %s: that is %s: writing the report there would destroy it — choose another path", o.flag, o.file, in.what)
			}
		}
		for _, other := range outs[:i] {
			if other.file != "" && samePath(o.file, other.file) {
				return usageErrorf("%s and %s both name %s: each report needs a file of its own", other.flag, o.flag, o.file)
			}
		}
	}
	return nil
}

// samePath reports whether a and b name the same file.
func samePath(a, b string) bool {
	if abs(a) == abs(b) {
		return true
	}
	sa, errA := os.Stat(a)
	sb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(sa, sb)
}

func abs(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return filepath.Clean(p)
}

// writeReport writes a report to file through a temporary file in the same
// directory, renamed over file once complete: a report that fails half-way
// leaves the previous file as it was, and a reader never sees half a
// report. A file that is not a regular file (/dev/stdout, a pipe) is
// written in place, since renaming over it would replace the device.
func writeReport(file string, r report.Reporter, cases []report.Case, o report.Options) error {
	target, mode := file, fs.FileMode(0o644)
	if resolved, err := filepath.EvalSymlinks(file); err == nil {
		target = resolved
		if st, err := os.Stat(target); err == nil {
			if !st.Mode().IsRegular() {
				return writeInPlace(file, r, cases, o)
			}
			mode = st.Mode().Perm()
		}
	}
	tmp, err := os.CreateTemp(filepath.Dir(target), "."+filepath.Base(target)+".racetest-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a successful rename, there is nothing to remove
	if err := r(tmp, cases, o); err != nil {
		tmp.Close()
		return fmt.Errorf("%s: %w (the previous file, if any, is unchanged)", file, err)
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), target)
}

func writeInPlace(file string, r report.Reporter, cases []report.Case, o report.Options) error {
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	if err := r(f, cases, o); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", file, err)
	}
	return f.Close()
}
