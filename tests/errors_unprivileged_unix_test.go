//go:build unix

package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// errsNobody is the unprivileged user (and group) the permission cases run
// as when the tests run as root.
const errsNobody = 65534

// errsRunUnprivileged is errsRun for the cases that need file permissions to
// bind: root bypasses them (CI runs as root), so as root the command runs as
// uid/gid 65534, after the directories it needs (those of the binaries, the
// working directory and every absolute path in args, from os.TempDir down)
// are made readable and traversable for others.
func errsRunUnprivileged(t *testing.T, fx *errsFixture, dir, name string, args ...string) errsResult {
	t.Helper()
	if os.Geteuid() != 0 {
		return errsRun(t, fx, dir, name, args...)
	}
	for _, p := range append([]string{fx.bin, dir}, args...) {
		if filepath.IsAbs(p) {
			defer errsOpenDirs(t, p)()
		}
	}
	cmd := exec.Command(filepath.Join(fx.bin, name), args...)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: errsNobody, Gid: errsNobody}}
	return errsRunCmd(t, name, cmd)
}

// errsOpenDirs adds r-x for others to p (when a directory) and to its
// parents below os.TempDir, where the tests make their files; it returns
// the function restoring their modes (the catalogue compares listings).
func errsOpenDirs(t *testing.T, p string) (restore func()) {
	t.Helper()
	var undo []func()
	restore = func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	tmp := filepath.Clean(os.TempDir())
	for d := filepath.Clean(p); strings.HasPrefix(d, tmp+string(filepath.Separator)); d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil || !fi.IsDir() {
			continue
		}
		if err := os.Chmod(d, fi.Mode().Perm()|0o005); err != nil {
			t.Fatal(err)
		}
		undo = append(undo, func() { os.Chmod(d, fi.Mode().Perm()) })
	}
	return restore
}
