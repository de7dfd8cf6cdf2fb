package suite

import (
	"errors"
	"fmt"
	"io"

	"github.com/racetest/racetest/internal/bounded"
)

// ReadFile reads a suite file: a regular file of at most MaxFileSize
// bytes. A device (/dev/zero), a named pipe or a directory is refused
// before it is opened for reading, since reading one may never end: the
// rules of every file a user names (internal/bounded), in a suite's words.
func ReadFile(name string) ([]byte, error) {
	data, err := bounded.ReadFile(name, MaxFileSize)
	return data, readError(name, err)
}

// Read reads a suite from r (standard input, for "-"), at most
// MaxFileSize bytes of it: past that, it stops reading and refuses.
func Read(name string, r io.Reader) ([]byte, error) {
	data, err := bounded.Read(name, r, MaxFileSize)
	return data, readError(name, err)
}

// readError says a refused read in a suite's words.
func readError(name string, err error) error {
	var nr *bounded.NotRegularError
	if errors.As(err, &nr) {
		return fmt.Errorf("%s is %s, not a suite file: give the path of a YAML file (or - to read the suite from standard input)", name, nr.What)
	}
	var tb *bounded.TooBigError
	if errors.As(err, &tb) && tb.Size > 0 {
		return fmt.Errorf("%s: %s", name, tooBig(int(min(tb.Size, 1<<40))))
	}
	if errors.As(err, &tb) {
		return fmt.Errorf("%s holds more than %d MiB: a suite file may be at most %d MiB (a suite is a few kilobytes: is this the right input?)",
			name, MaxFileSize>>20, MaxFileSize>>20)
	}
	return err
}
