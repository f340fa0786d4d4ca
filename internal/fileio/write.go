package fileio

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// output is where WriteFile puts the data of a checked output path.
type output struct {
	path   string      // the file to replace, symbolic links resolved
	device bool        // written in place
	perm   fs.FileMode // of the replacement
}

// CheckOutput reports whether WriteFile may write path, without writing:
// a regular file that is not an input of the command, a device, or a new
// file in an existing directory. Commands call it before long work so that
// a bad output path is refused at once.
func CheckOutput(path string) error {
	_, err := checkOutput(path)
	return err
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

// WriteFile stores data at path (see CheckOutput for what path may be). A
// regular file is replaced atomically: the data goes to a temporary file in
// the same directory, which is synced, given the old file's permissions
// (0o644 for a new one) and renamed over it; on any failure, or a signal,
// the temporary file is removed and path is untouched. A device is written
// directly. Errors name path: "out.plan: no space left on device".
func WriteFile(path string, data []byte) error {
	out, err := checkOutput(path)
	if err != nil {
		return err
	}
	if out.device {
		err = writeDevice(out.path, data)
	} else {
		err = replace(out.path, out.perm, data)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", path, Cause(err))
	}
	return nil
}

func writeDevice(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	return errors.Join(err, f.Close())
}

func replace(path string, perm fs.FileMode, data []byte) error {
	dir := filepath.Dir(path)
	f, err := createTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	err = fill(f, perm, data)
	if err != nil {
		settle(tmp, func() error { return os.Remove(tmp) })
		return err
	}
	if err := settle(tmp, func() error { return os.Rename(tmp, path) }); err != nil {
		os.Remove(tmp)
		return err
	}
	if d, err := os.Open(dir); err == nil { // best effort: the rename persists
		d.Sync()
		d.Close()
	}
	return nil
}

// fill writes, syncs and closes the temporary file.
func fill(f *os.File, perm fs.FileMode, data []byte) error {
	_, err := f.Write(data)
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
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
