package fileio

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// output is where WriteFile puts the data of a checked output path.
type output struct {
	path   string      // the file to replace, symbolic links resolved
	device bool        // written in place
	perm   fs.FileMode // of the replacement
}

// CheckOutput reports whether WriteFile may write path, without writing:
// a regular file that is not an input of the command, a device, or a new
// file in an existing directory. Commands call it for each output before
// long work, so that a bad output path is refused at once; while a command
// runs (RecordInputs), a file named by two outputs is refused too.
func CheckOutput(path string) error {
	out, err := checkOutput(path)
	if err != nil || out.device {
		return err
	}
	return reserve(path, out.path)
}

func checkOutput(path string) (output, error) {
	st, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		if l, lerr := os.Lstat(path); lerr == nil && l.Mode()&fs.ModeSymlink != 0 {
			return output{}, fmt.Errorf("%s: is a symbolic link to a missing file", path)
		}
		if err := checkParent(path); err != nil {
			return output{}, err
		}
		return output{path: path, perm: 0o644}, nil
	}
	if err != nil {
		return output{}, fmt.Errorf("%s: %w", path, Cause(err))
	}
	switch m := st.Mode(); {
	case m.IsDir():
		return output{}, fmt.Errorf("%s: is a directory", path)
	case m&fs.ModeDevice != 0:
		return output{path: path, device: true}, nil
	case !m.IsRegular():
		return output{}, fmt.Errorf("%s: is %s; give a regular file or a device", path, kind(m))
	}
	if err := notAnInput(path, st); err != nil {
		return output{}, err
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return output{}, fmt.Errorf("%s: %w", path, Cause(err))
	}
	// The rename needs only the directory writable: refuse a file that
	// could not be written in place, as cp would.
	if err := unix.Access(real, unix.W_OK); err != nil {
		return output{}, fmt.Errorf("%s: %w", path, err)
	}
	return output{path: real, perm: st.Mode().Perm()}, nil
}

// checkParent makes sure the directory of a new output exists.
func checkParent(path string) error {
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s: directory %s does not exist", path, dir)
	case err != nil:
		return fmt.Errorf("%s: %w", path, Cause(err))
	case !st.IsDir():
		return fmt.Errorf("%s: %s is not a directory", path, dir)
	}
	return nil
}

// notAnInput refuses an output that is a file the command reads.
func notAnInput(path string, st os.FileInfo) error {
	for _, in := range inputs() {
		if os.SameFile(st, in.info) {
			return fmt.Errorf("%s: is the input %s; choose another output", path, in.path)
		}
	}
	return nil
}

// WriteFile stores data at path (see CheckOutput for what path may be)
// through Create, Write and Commit. Errors name path: "out.plan: no space
// left on device".
func WriteFile(path string, data []byte) error {
	f, err := Create(path)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Abort()
		return err
	}
	return f.Commit()
}

// File is an output being written, for data that is streamed (a CPU
// profile) rather than held whole. A regular file is written to a
// temporary file in the same directory that Commit syncs, gives the old
// file's permissions (0o644 for a new one) and renames over path, and that
// Abort, a failure or a signal removes: path is never seen half-written. A
// device is written directly.
type File struct {
	path string // as the caller named it, for messages
	out  output
	f    *os.File
	tmp  string // the temporary file; "" for a device
}

// Create starts writing the output path (see CheckOutput).
func Create(path string) (*File, error) {
	out, err := checkOutput(path)
	if err != nil {
		return nil, err
	}
	w := &File{path: path, out: out}
	if out.device {
		w.f, err = os.OpenFile(out.path, os.O_WRONLY, 0)
	} else {
		w.f, err = createTemp(filepath.Dir(out.path), "."+filepath.Base(out.path)+".tmp*")
		if err == nil {
			w.tmp = w.f.Name()
		}
	}
	if err != nil {
		return nil, w.fail(err)
	}
	return w, nil
}

// Write writes p; errors name the output path.
func (w *File) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	if err != nil {
		err = w.fail(err)
	}
	return n, err
}

// Commit finishes the output: a regular file is synced and renamed into
// place, after checking again that it is none of the command's inputs (an
// input may have been opened since Create).
func (w *File) Commit() error {
	if w.tmp == "" {
		return w.fail(w.f.Close())
	}
	err := w.f.Chmod(w.out.perm)
	if err == nil {
		err = w.f.Sync()
	}
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		if st, serr := os.Stat(w.out.path); serr == nil {
			if err := notAnInput(w.path, st); err != nil {
				w.Abort()
				return err
			}
		}
		err = settle(w.tmp, func() error { return os.Rename(w.tmp, w.out.path) })
	}
	if err != nil {
		w.Abort()
		return w.fail(err)
	}
	if d, err := os.Open(filepath.Dir(w.out.path)); err == nil { // best effort: the rename persists
		d.Sync()
		d.Close()
	}
	return nil
}

// Abort gives up the output: a temporary file is removed, path untouched.
func (w *File) Abort() {
	w.f.Close()
	if w.tmp != "" {
		settle(w.tmp, func() error { return os.Remove(w.tmp) }) // refused after a signal, whose handler removed it
	}
}

func (w *File) fail(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", w.path, Cause(err))
}

// Cause is the cause of an os error without the operation and path it
// names (which may be a temporary file's), for a message that names the
// path the person gave: fmt.Errorf("%s: %w", path, fileio.Cause(err)).
func Cause(err error) error {
	var pe *fs.PathError
	var le *os.LinkError
	var se *os.SyscallError
	switch {
	case errors.As(err, &pe):
		return pe.Err
	case errors.As(err, &le):
		return le.Err
	case errors.As(err, &se):
		return se.Err
	}
	return err
}
