package suite

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/racetest/racetest/internal/bounded"
)

// ReadFile reads a suite file: a regular file of at most MaxFileSize
// bytes. A device (/dev/zero), a named pipe or a directory is refused
// before it is opened for reading, since reading one may never end.
func ReadFile(name string) ([]byte, error) {
	st, err := os.Stat(name)
	if err != nil {
		return nil, err
	}
	if err := regular(name, st); err != nil {
		return nil, err
	}
	if st.Size() > MaxFileSize {
		return nil, fmt.Errorf("%s: %s", name, tooBig(int(min(st.Size(), 1<<40))))
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// The file may have been swapped since the Stat: check again what was
	// opened, and read no further than the cap whatever it says.
	if st2, err := f.Stat(); err != nil {
		return nil, err
	} else if err := regular(name, st2); err != nil {
		return nil, err
	}
	return Read(name, f)
}

// Read reads a suite from r (standard input, for "-"), at most
// MaxFileSize bytes of it: past that, it stops reading and refuses.
func Read(name string, r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("%s holds more than %d MiB: a suite file may be at most %d MiB (a suite is a few kilobytes: is this the right input?)",
			name, MaxFileSize>>20, MaxFileSize>>20)
	}
	return data, nil
}

func regular(name string, st fs.FileInfo) error {
	var nr *bounded.NotRegularError
	if err := bounded.Regular(name, st); errors.As(err, &nr) {
		return fmt.Errorf("%s is %s, not a suite file: give the path of a YAML file (or - to read the suite from standard input)", name, nr.What)
	}
	return nil
}
