// Package bounded reads the files a user names (a suite, a script's
// @FILE, an HTTP body's @FILE) with the same rules everywhere: a regular
// file of at most a given size. A device (/dev/zero), a named pipe, a
// socket or a directory is refused before anything is read from it, since
// reading one may never end; a file larger than the cap is refused from
// its size, and a file that grows while it is read is read no further
// than the cap.
package bounded

import (
	"fmt"
	"io"
	"io/fs"
	"os"
)

// TooBigError is a file or stream past its cap.
type TooBigError struct {
	Name string
	Max  int64
	// Size is the file's size when it was refused from it; 0 for a
	// stream, read up to the cap.
	Size int64
}

func (e *TooBigError) Error() string {
	return fmt.Sprintf("%s holds more than %s: the most racetest reads here", e.Name, Size(e.Max))
}

// NotRegularError is a path that names something other than a regular file.
type NotRegularError struct {
	Name, What string
}

func (e *NotRegularError) Error() string {
	return fmt.Sprintf("%s is %s, not a regular file", e.Name, e.What)
}

// ReadFile reads the regular file name, at most max bytes of it.
func ReadFile(name string, max int64) ([]byte, error) {
	st, err := os.Stat(name)
	if err != nil {
		return nil, err
	}
	if err := Regular(name, st); err != nil {
		return nil, err
	}
	if st.Size() > max {
		return nil, &TooBigError{Name: name, Max: max, Size: st.Size()}
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// The path may have been swapped since the Stat: check again what was
	// opened.
	if st2, err := f.Stat(); err != nil {
		return nil, err
	} else if err := Regular(name, st2); err != nil {
		return nil, err
	}
	return Read(name, f, max)
}

// Read reads r (standard input, say) to its end, at most max bytes of it:
// past that it stops reading and refuses.
func Read(name string, r io.Reader, max int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, &TooBigError{Name: name, Max: max}
	}
	return data, nil
}

// Regular returns a *NotRegularError unless st is a regular file's.
func Regular(name string, st fs.FileInfo) error {
	m := st.Mode()
	if m.IsRegular() {
		return nil
	}
	what := "not a regular file"
	switch {
	case m.IsDir():
		what = "a directory"
	case m&fs.ModeNamedPipe != 0:
		what = "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		what = "a socket"
	case m&fs.ModeCharDevice != 0:
		what = "a character device"
	case m&fs.ModeDevice != 0:
		what = "a device"
	}
	return &NotRegularError{Name: name, What: what}
}

// Size is n bytes for a person: "4 MiB", "512 KiB", "100 bytes".
func Size(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
