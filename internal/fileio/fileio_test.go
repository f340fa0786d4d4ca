package fileio

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// entries lists dir, to show that nothing (no temporary file) is left.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func wantErr(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %q", want)
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q, want %q", err, want)
	}
	if strings.Contains(err.Error(), ".tmp") {
		t.Fatalf("error %q names a temporary file", err)
	}
}

func TestWriteFileRegular(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "x.plan")
	if err := WriteFile(p, []byte("one")); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(p); st.Mode().Perm() != 0o644 {
		t.Errorf("new file has mode %v, want 0644", st.Mode().Perm())
	}
	os.Chmod(p, 0o600)
	if err := WriteFile(p, []byte("two")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "two" {
		t.Fatalf("content %q", b)
	}
	if st, _ := os.Stat(p); st.Mode().Perm() != 0o600 {
		t.Errorf("replaced file has mode %v, want the old 0600", st.Mode().Perm())
	}
	// Through a symbolic link: the link stays, its target is replaced.
	l := filepath.Join(dir, "link")
	if err := os.Symlink("x.plan", l); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(l, []byte("three")); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Lstat(l); st.Mode()&fs.ModeSymlink == 0 {
		t.Error("the symbolic link was replaced by a file")
	}
	if b, _ := os.ReadFile(p); string(b) != "three" {
		t.Fatalf("target content %q", b)
	}
	if got := entries(t, dir); len(got) != 2 {
		t.Fatalf("directory holds %v, want x.plan and link", got)
	}
	// A read-only file is not replaced (root may write it: tested as an
	// unprivileged user by the catalogue's compile-output-read-only).
	if os.Geteuid() != 0 {
		os.Chmod(p, 0o444)
		wantErr(t, WriteFile(p, []byte("four")), p+": permission denied")
		if b, _ := os.ReadFile(p); string(b) != "three" {
			t.Fatalf("read-only file now holds %q", b)
		}
	}
}

func TestWriteFileRefusals(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "sub")
	os.Mkdir(sub, 0o755)
	wantErr(t, WriteFile(sub, []byte("x")), sub+": is a directory")
	missing := filepath.Join(dir, "missing", "f")
	wantErr(t, WriteFile(missing, []byte("x")), missing+": directory "+filepath.Join(dir, "missing")+" does not exist")
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	wantErr(t, WriteFile(fifo, []byte("x")), fifo+": is a named pipe; give a regular file or a device")
	dangling := filepath.Join(dir, "dangling")
	os.Symlink("nowhere", dangling)
	wantErr(t, WriteFile(dangling, []byte("x")), "is a symbolic link to a missing file")
	if st, _ := os.Lstat(fifo); st.Mode()&fs.ModeNamedPipe == 0 {
		t.Error("the FIFO was replaced")
	}
	if got := entries(t, dir); len(got) != 3 {
		t.Fatalf("directory holds %v, want sub, fifo, dangling", got)
	}
	if got := entries(t, sub); len(got) != 0 {
		t.Fatalf("sub holds %v", got)
	}
}

// TestWriteFileDevice: a device is written in place, never replaced by a
// regular file. As root (CI) a null device made with mknod in a temporary
// directory stands for /dev/null, so that a regression cannot replace the
// real one; otherwise /dev/null itself, whose directory we cannot write.
func TestWriteFileDevice(t *testing.T) {
	null := "/dev/null"
	if os.Geteuid() == 0 {
		null = filepath.Join(t.TempDir(), "null")
		if err := syscall.Mknod(null, syscall.S_IFCHR|0o666, 1<<8|3); err != nil {
			t.Fatalf("mknod as root: %v", err)
		}
	}
	if err := WriteFile(null, []byte("gone")); err != nil {
		t.Fatalf("writing %s: %v", null, err)
	}
	if st, err := os.Stat(null); err != nil || st.Mode()&fs.ModeCharDevice == 0 {
		t.Fatalf("%s is no longer a character device: %v %v", null, st.Mode(), err)
	}
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full on this system")
	}
	err := WriteFile("/dev/full", []byte("x"))
	wantErr(t, err, "/dev/full: no space left on device")
	if !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("%v does not wrap ENOSPC", err)
	}
}

func TestInputsAreNotOutputs(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "config.json")
	os.WriteFile(p, []byte("{}"), 0o644)
	hard := filepath.Join(dir, "hard.json")
	if _, err := ReadFile(p, 1<<10); err != nil {
		t.Fatal(err)
	}
	// Not recording (library use): a file read may be rewritten.
	if err := WriteFile(p, []byte("{}")); err != nil {
		t.Fatal(err)
	}
	stop := RecordInputs()
	if _, err := ReadFile(p, 1<<10); err != nil {
		t.Fatal(err)
	}
	wantErr(t, WriteFile(p, []byte("x")), p+": is the input "+p+"; choose another output")
	os.Link(p, hard)
	wantErr(t, WriteFile(hard, []byte("x")), hard+": is the input "+p)
	wantErr(t, CheckOutputDir(dir), dir+": holds the input "+p+"; choose another output directory")
	if _, err := CreateDir(dir); err == nil {
		t.Error("CreateDir accepted the directory of an input")
	}
	if err := WriteFile(filepath.Join(dir, "other"), []byte("x")); err != nil {
		t.Error(err)
	}
	// Two outputs naming one file (here through a symbolic link to the
	// directory) would overwrite each other; a device may take both.
	out := filepath.Join(dir, "out")
	os.Symlink(".", filepath.Join(dir, "self"))
	if err := CheckOutput(out); err != nil {
		t.Fatal(err)
	}
	wantErr(t, CheckOutput(filepath.Join(dir, "self", "out")), "out: is already an output of this command; give each output its own file")
	for range 2 {
		if err := CheckOutput("/dev/null"); err != nil {
			t.Errorf("a device refused as a second output: %v", err)
		}
	}
	stop()
	if err := CheckOutput(out); err != nil {
		t.Errorf("after stop: %v", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "{}" {
		t.Errorf("input changed to %q", b)
	}
	if err := CheckOutputDir(dir); err != nil {
		t.Errorf("after stop: %v", err)
	}
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	os.WriteFile(p, []byte("12345"), 0o644)
	if b, err := ReadFile(p, 5); err != nil || string(b) != "12345" {
		t.Fatalf("%q %v", b, err)
	}
	wantErr(t, errOf(ReadFile(p, 4)), p+": larger than 4 bytes, the limit for this file")
	big := filepath.Join(dir, "big")
	f, _ := os.Create(big)
	f.Truncate(65 << 20) // sparse
	f.Close()
	wantErr(t, errOf(ReadFile(big, 64<<20)), big+": larger than 64 MiB, the limit for this file")
	wantErr(t, errOf(ReadFile(dir, 1<<20)), dir+": is a directory")
	if _, err := ReadFile(filepath.Join(dir, "nope"), 1); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v, want ErrNotExist", err)
	}
	fifo := filepath.Join(dir, "fifo")
	syscall.Mkfifo(fifo, 0o644)
	done := make(chan error, 1)
	go func() { done <- errOf(ReadFile(fifo, 1<<20)) }()
	select {
	case err := <-done:
		wantErr(t, err, fifo+": not a regular file (a named pipe)")
	case <-time.After(10 * time.Second):
		t.Fatal("reading a FIFO blocked")
	}
	if _, err := os.Stat("/dev/zero"); err == nil {
		wantErr(t, errOf(ReadFile("/dev/zero", 1<<20)), "/dev/zero: not a regular file (a character device)")
	}
	// /proc files state size 0: the limit holds on what is read.
	if _, err := os.Stat("/proc/self/maps"); err == nil {
		wantErr(t, errOf(ReadFile("/proc/self/maps", 16)), "larger than 16 bytes")
	}
}

func errOf(_ []byte, err error) error { return err }

func TestCreateDir(t *testing.T) {
	root := t.TempDir()
	// A new nested directory appears whole at Commit.
	out := filepath.Join(root, "a", "b")
	d, err := CreateDir(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.WriteFile("f", []byte("1")); err != nil {
		t.Fatal(err)
	}
	// Errors name the file under the final directory, not the staging one.
	wantErr(t, d.WriteFile(filepath.Join("no", "g"), nil), filepath.Join(out, "no", "g")+": no such file or directory")
	if _, err := os.Stat(filepath.Join(root, "a")); err == nil {
		t.Fatal("the directory exists before Commit")
	}
	if err := d.Commit(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(out, "f")); string(b) != "1" {
		t.Fatalf("f holds %q", b)
	}
	if got := entries(t, root); len(got) != 1 {
		t.Fatalf("root holds %v, want a", got)
	}
	// An existing directory: same names replaced, the others kept.
	os.WriteFile(filepath.Join(out, "keep"), []byte("k"), 0o644)
	d, _ = CreateDir(out)
	os.WriteFile(filepath.Join(d.Path(), "f"), []byte("2"), 0o644)
	if err := d.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(entries(t, out), " "); got != "f keep" {
		t.Fatalf("out holds %s", got)
	}
	if b, _ := os.ReadFile(filepath.Join(out, "f")); string(b) != "2" {
		t.Fatalf("f holds %q", b)
	}
	// Remove: nothing changes, nothing is left.
	d, _ = CreateDir(out)
	os.WriteFile(filepath.Join(d.Path(), "f"), []byte("3"), 0o644)
	d.Remove()
	if got := strings.Join(entries(t, out), " "); got != "f keep" {
		t.Fatalf("out holds %s after Remove", got)
	}
	d, _ = CreateDir(filepath.Join(root, "new"))
	d.Remove()
	if got := entries(t, root); len(got) != 1 {
		t.Fatalf("root holds %v after Remove", got)
	}
	// A clash with a directory of the same name changes nothing.
	os.Mkdir(filepath.Join(out, "g"), 0o755)
	d, _ = CreateDir(out)
	os.WriteFile(filepath.Join(d.Path(), "f"), []byte("4"), 0o644)
	os.WriteFile(filepath.Join(d.Path(), "g"), []byte("4"), 0o644)
	wantErr(t, d.Commit(), filepath.Join(out, "g")+": is a directory, not a file this command may replace")
	if b, _ := os.ReadFile(filepath.Join(out, "f")); string(b) != "2" {
		t.Fatalf("f holds %q after a failed Commit", b)
	}
	if got := strings.Join(entries(t, out), " "); got != "f g keep" {
		t.Fatalf("out holds %s", got)
	}
	file := filepath.Join(root, "file")
	os.WriteFile(file, nil, 0o644)
	wantErr(t, errOf2(CreateDir(file)), file+": not a directory")
	wantErr(t, errOf2(CreateDir(filepath.Join(file, "x"))), filepath.Join(file, "x")+": not a directory")
}

func errOf2(_ *Dir, err error) error { return err }

func TestRemoveTemporaries(t *testing.T) {
	dir := t.TempDir()
	f, err := createTemp(dir, "x*")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	st, err := mkdirTemp(dir, "d")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(st, "inner"), nil, 0o644)
	RemoveTemporaries()
	defer func() { reg.Lock(); reg.closed = false; reg.Unlock() }()
	if got := entries(t, dir); len(got) != 0 {
		t.Fatalf("left %v", got)
	}
	if err := WriteFile(filepath.Join(dir, "late"), nil); err == nil {
		t.Fatal("a write after RemoveTemporaries went ahead")
	}
	if got := entries(t, dir); len(got) != 0 {
		t.Fatalf("left %v", got)
	}
}

// TestCreate: a streamed output appears only at Commit, Abort leaves
// nothing, and Commit refuses a target that became an input meanwhile.
func TestCreate(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "cpu.prof")
	f, err := Create(p)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("ab"))
	if _, err := os.Stat(p); err == nil {
		t.Fatal("the output exists before Commit")
	}
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "ab" {
		t.Fatalf("content %q", b)
	}
	f, _ = Create(p)
	f.Write([]byte("cd"))
	f.Abort()
	if b, _ := os.ReadFile(p); string(b) != "ab" {
		t.Fatalf("content %q after Abort", b)
	}
	stop := RecordInputs()
	defer stop()
	f, _ = Create(p)
	f.Write([]byte("ef"))
	if _, err := ReadFile(p, 10); err != nil {
		t.Fatal(err)
	}
	wantErr(t, f.Commit(), p+": is the input "+p)
	if b, _ := os.ReadFile(p); string(b) != "ab" {
		t.Fatalf("content %q after a refused Commit", b)
	}
	if got := entries(t, dir); len(got) != 1 {
		t.Fatalf("directory holds %v", got)
	}
}
