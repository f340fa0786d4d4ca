package fileio

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
)

// reg is the process's record of a command's inputs and of the temporary
// files and directories in progress.
var reg struct {
	sync.Mutex
	recording bool
	inputs    []input
	outputs   []string        // files reserved by CheckOutput, symbolic links resolved
	temps     map[string]bool // path -> is a directory
	closed    bool            // RemoveTemporaries ran: the process is exiting
}

type input struct {
	path string
	info os.FileInfo
}

// errClosed refuses new temporaries once RemoveTemporaries has run.
var errClosed = errors.New("interrupted")

// RecordInputs starts remembering the files opened by Open and ReadFile, so
// that WriteFile and CreateDir refuse to overwrite them, and the outputs
// CheckOutput reserves; stop forgets both.
// internal/cli brackets every command with it; library callers that read
// and then rewrite a file on purpose are not affected.
func RecordInputs() (stop func()) {
	reg.Lock()
	reg.recording, reg.inputs, reg.outputs = true, nil, nil
	reg.Unlock()
	return func() {
		reg.Lock()
		reg.recording, reg.inputs, reg.outputs = false, nil, nil
		reg.Unlock()
	}
}

func noteInput(path string, info os.FileInfo) {
	reg.Lock()
	defer reg.Unlock()
	if reg.recording {
		reg.inputs = append(reg.inputs, input{path, info})
	}
}

// reserve records the output file real (path as named) and refuses one
// reserved before: two outputs of a command would overwrite each other.
func reserve(path, real string) error {
	dir, err := filepath.EvalSymlinks(filepath.Dir(real))
	if err != nil {
		return fmt.Errorf("%s: %w", path, Cause(err))
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return fmt.Errorf("%s: %w", path, Cause(err))
	}
	key := filepath.Join(dir, filepath.Base(real))
	reg.Lock()
	defer reg.Unlock()
	if !reg.recording {
		return nil
	}
	for _, o := range reg.outputs {
		if o == key {
			return fmt.Errorf("%s: is already an output of this command; give each output its own file", path)
		}
	}
	reg.outputs = append(reg.outputs, key)
	return nil
}

// inputs returns a copy of the recorded inputs.
func inputs() []input {
	reg.Lock()
	defer reg.Unlock()
	return append([]input(nil), reg.inputs...)
}

// createTemp creates and registers a temporary file in dir, under the lock
// so that RemoveTemporaries cannot miss it.
func createTemp(dir, pattern string) (*os.File, error) {
	reg.Lock()
	defer reg.Unlock()
	if reg.closed {
		return nil, errClosed
	}
	f, err := os.CreateTemp(dir, pattern)
	if err == nil {
		addTemp(f.Name(), false)
	}
	return f, err
}

// mkdirTemp creates and registers a temporary directory in dir, with the
// permissions of an ordinary new directory (0o755 less the umask).
func mkdirTemp(dir, prefix string) (string, error) {
	reg.Lock()
	defer reg.Unlock()
	if reg.closed {
		return "", errClosed
	}
	for {
		p := filepath.Join(dir, prefix+strconv.FormatUint(rand.Uint64(), 36))
		err := os.Mkdir(p, 0o755)
		if err == nil {
			addTemp(p, true)
			return p, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return "", err
		}
	}
}

func addTemp(p string, dir bool) {
	if reg.temps == nil {
		reg.temps = map[string]bool{}
	}
	reg.temps[p] = dir
}

// settle runs fn (the rename that puts a temporary into place, or its
// removal) and forgets the temporary, both under the lock: a signal sees
// either the temporary or the finished output, never a half-renamed state.
func settle(p string, fn func() error) error {
	reg.Lock()
	defer reg.Unlock()
	if reg.closed {
		return errClosed
	}
	delete(reg.temps, p)
	return fn()
}

// RemoveTemporaries removes every registered temporary file and directory
// and refuses new ones; for a process that is about to exit on a signal.
func RemoveTemporaries() {
	reg.Lock()
	defer reg.Unlock()
	reg.closed = true
	for p, dir := range reg.temps {
		if dir {
			os.RemoveAll(p)
		} else {
			os.Remove(p)
		}
	}
	reg.temps = nil
}
