package fileio

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// CheckOutputDir reports whether dir may receive a command's output files:
// it is a directory or does not exist yet, and holds none of the command's
// inputs (synth -o into the checkpoint it reads the config from, compile
// -dump-dir into the model directory).
func CheckOutputDir(dir string) error {
	st, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", dir, Cause(err))
	}
	if !st.IsDir() {
		return fmt.Errorf("%s: not a directory", dir)
	}
	for _, in := range inputs() {
		if p, err := os.Stat(filepath.Dir(in.path)); err == nil && os.SameFile(p, st) {
			return fmt.Errorf("%s: holds the input %s; choose another output directory", dir, in.path)
		}
	}
	return nil
}

// Dir is an output directory being written. Its files go to a temporary
// directory that Commit moves into place and Remove deletes, so a failed or
// interrupted command leaves neither a half-written directory nor a change
// to an existing one.
type Dir struct {
	final string // the directory named by the caller
	stage string // the temporary directory
	work  string // where the files go: stage, or a subdirectory of it
	top   string // the first missing ancestor of final (or final), which Commit creates by renaming stage; "" if final exists
}

// CreateDir starts an output directory (see CheckOutputDir). When dir
// exists, the temporary directory sits inside it and Commit moves each file
// into dir, replacing files of the same name and keeping the others; when
// it does not, the temporary directory sits next to the first missing
// ancestor and Commit renames it into place.
func CreateDir(dir string) (*Dir, error) {
	if err := CheckOutputDir(dir); err != nil {
		return nil, err
	}
	d := &Dir{final: dir}
	top, err := firstMissing(dir)
	if err != nil {
		return nil, err
	}
	parent := dir
	if top != "" {
		parent = filepath.Dir(top)
	}
	d.top = top
	if d.stage, err = mkdirTemp(parent, ".ds4-"+filepath.Base(dir)+".tmp"); err != nil {
		return nil, fmt.Errorf("%s: %w", dir, Cause(err))
	}
	d.work = d.stage
	if top != "" {
		rel, err := filepath.Rel(top, dir)
		if err == nil && rel != "." {
			d.work = filepath.Join(d.stage, rel)
			err = os.MkdirAll(d.work, 0o755)
		}
		if err != nil {
			d.Remove()
			return nil, fmt.Errorf("%s: %w", dir, Cause(err))
		}
	}
	return d, nil
}

// firstMissing returns the ancestor of dir (or dir itself) closest to the
// root that does not exist, or "" when dir exists.
func firstMissing(dir string) (string, error) {
	missing := ""
	for p := filepath.Clean(dir); ; p = filepath.Dir(p) {
		st, err := os.Stat(p)
		switch {
		case err == nil && st.IsDir():
			return missing, nil
		case err == nil:
			return "", fmt.Errorf("%s: %s is not a directory", dir, p)
		case !errors.Is(err, fs.ErrNotExist):
			return "", fmt.Errorf("%s: %w", dir, Cause(err))
		}
		missing = p
		if filepath.Dir(p) == p {
			return "", fmt.Errorf("%s: %w", dir, Cause(err))
		}
	}
}

// Path is the directory to write the files into.
func (d *Dir) Path() string { return d.work }

// Final is the directory the files end up in.
func (d *Dir) Final() string { return d.final }

// WriteFile writes the file name of the directory (into Path); errors
// name it under the final directory.
func (d *Dir) WriteFile(name string, data []byte) error {
	if err := os.WriteFile(filepath.Join(d.work, name), data, 0o644); err != nil {
		return d.Err(name, err)
	}
	return nil
}

// Err is err of the file name written into Path, naming it under the final
// directory.
func (d *Dir) Err(name string, err error) error {
	return fmt.Errorf("%s: %w", filepath.Join(d.final, name), Cause(err))
}

// Commit puts the written files in place; errors name the final paths.
func (d *Dir) Commit() error {
	if d.top != "" {
		err := settle(d.stage, func() error { return os.Rename(d.stage, d.top) })
		if err != nil {
			os.RemoveAll(d.stage)
			return fmt.Errorf("%s: %w", d.final, Cause(err))
		}
		return nil
	}
	ents, err := os.ReadDir(d.stage)
	if err != nil {
		d.Remove()
		return fmt.Errorf("%s: %w", d.final, Cause(err))
	}
	// Check every name first so that a clash changes nothing.
	for _, e := range ents {
		p := filepath.Join(d.final, e.Name())
		if st, err := os.Lstat(p); err == nil && !st.Mode().IsRegular() {
			d.Remove()
			return fmt.Errorf("%s: is %s, not a file this command may replace", p, describe(st.Mode()))
		}
	}
	return settle(d.stage, func() error {
		defer os.RemoveAll(d.stage)
		for _, e := range ents {
			p := filepath.Join(d.final, e.Name())
			if err := os.Rename(filepath.Join(d.stage, e.Name()), p); err != nil {
				return fmt.Errorf("%s: %w", p, Cause(err))
			}
		}
		return nil
	})
}

func describe(m fs.FileMode) string {
	if m.IsDir() {
		return "a directory"
	}
	return kind(m)
}

// Remove deletes the temporary directory and everything written to it.
func (d *Dir) Remove() {
	settle(d.stage, func() error { return os.RemoveAll(d.stage) })
}
