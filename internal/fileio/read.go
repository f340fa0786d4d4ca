package fileio

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
	"unicode/utf8"
)

// Open opens an input that must be a regular file. The open is
// non-blocking, so a FIFO answers at once instead of waiting for a writer;
// open errors are the os package's (*fs.PathError, so errors.Is(err,
// fs.ErrNotExist) holds), the others name path: "is a directory", "not a
// regular file (a character device)". The file is recorded as an input of
// the running command (RecordInputs).
func Open(path string) (*os.File, os.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Stat()
	if err == nil {
		err = regular(path, st)
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	noteInput(path, st)
	return f, st, nil
}

// regular refuses what is not a regular file.
func regular(path string, st os.FileInfo) error {
	switch m := st.Mode(); {
	case m.IsRegular():
		return nil
	case m.IsDir():
		return fmt.Errorf("%s: is a directory", path)
	default:
		return fmt.Errorf("%s: not a regular file (%s)", path, kind(m))
	}
}

// kind names the type of a file that is neither regular nor a directory.
func kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "a special file"
}

// ReadFile reads the regular file at path (see Open), refusing one larger
// than limit bytes; at most limit+1 bytes are read whatever its stated size
// (files of /proc say 0).
func ReadFile(path string, limit int64) ([]byte, error) {
	f, st, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st.Size() > limit {
		return nil, tooLarge(path, limit)
	}
	var buf bytes.Buffer
	buf.Grow(int(st.Size()) + bytes.MinRead) // ReadFrom wants MinRead bytes free to stop at EOF
	if _, err := buf.ReadFrom(io.LimitReader(f, limit+1)); err != nil {
		return nil, fmt.Errorf("%s: %w", path, Cause(err))
	}
	if int64(buf.Len()) > limit {
		return nil, tooLarge(path, limit)
	}
	return buf.Bytes(), nil
}

func tooLarge(path string, limit int64) error {
	return fmt.Errorf("%s: larger than %s, the limit for this file", path, bytesText(limit))
}

// bytesText writes n in the largest binary unit that divides it.
func bytesText(n int64) string {
	for _, u := range []struct {
		name string
		size int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.size && n%u.size == 0 {
			return fmt.Sprintf("%d %s", n/u.size, u.name)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}

// InvalidUTF8 is the offset of the first byte of b that is not valid
// UTF-8, or -1 (for messages that name where a text input goes wrong).
func InvalidUTF8(b []byte) int {
	if utf8.Valid(b) {
		return -1
	}
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return -1
}
