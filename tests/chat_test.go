//go:build linux

package tests

// exec -chat driven through a pseudo-terminal, as a person at a terminal
// drives it: lines typed (echoed by the terminal), the answer streamed,
// Ctrl-C (the terminal's SIGINT to the foreground process group) stopping
// one answer while the conversation goes on, Ctrl-D ending it.

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal pair: the master and its slave.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	fd := int(m.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return m, s
}

// screen collects what the terminal shows.
type screen struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *screen) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *screen) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// waitFor waits until cond holds of the screen.
func (s *screen) waitFor(t *testing.T, what string, cond func(string) bool) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second) // the model loads in well under a second
	for time.Now().Before(deadline) {
		if out := s.String(); cond(out) {
			return out
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s; the screen:\n%q", what, s.String())
	return ""
}

// turnEnds counts the answers ended, by any of the three markers.
func turnEnds(out string) int {
	return strings.Count(out, "[end of turn]") + strings.Count(out, "[answer cut") + strings.Count(out, "[stopped]")
}

// TestChatThroughTerminal: a three-turn conversation on the tiny model
// through a pty; the second answer is interrupted with Ctrl-C after it has
// begun to stream, the third turn is answered, Ctrl-D ends with status 0.
func TestChatThroughTerminal(t *testing.T) {
	plan := tinyPlan(t)
	model, _ := filepath.Abs(tinyDir())
	master, slave := openPTY(t)
	defer master.Close()
	// 200 tokens take about a second on the tiny model: time enough to
	// press Ctrl-C during the second answer. The reference kernels give the
	// same bits on every amd64 host, so the greedy answers (and that the
	// second does not end by itself early) do not depend on the SIMD level.
	cmd := exec.Command(filepath.Join(binDir, "exec"), "-plan", plan, "-model", model, "-backend", "cpu-ref", "-chat", "-max-new-tokens", "200", "-max-len", "2048", "-system", "Be brief.")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	var scr screen
	copied := make(chan bool)
	go func() { copyOut(master, &scr); close(copied) }()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	}()
	prompts := func(n int) func(string) bool {
		return func(out string) bool { return strings.Count(out, "> ") >= n }
	}
	type_ := func(s string) {
		if _, err := master.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}

	scr.waitFor(t, "the first prompt", prompts(1))
	type_("Hello there\r")
	scr.waitFor(t, "the end of the first answer", func(out string) bool { return turnEnds(out) == 1 && strings.Count(out, "> ") >= 2 })

	type_("Tell me more\r")
	echo := scr.waitFor(t, "the second line's echo", func(out string) bool { return strings.Contains(out, "Tell me more\r\n") })
	from := strings.Index(echo, "Tell me more\r\n") + len("Tell me more\r\n")
	// Streaming: answer text shows before the answer has ended.
	scr.waitFor(t, "the second answer's first text", func(out string) bool { return len(out) > from+2 })
	if out := scr.String(); turnEnds(out) != 1 {
		t.Fatalf("the second answer ended before Ctrl-C (not streamed, or too short to interrupt):\n%q", out)
	}
	type_("\x03")
	scr.waitFor(t, "the stopped second answer", func(out string) bool { return strings.Contains(out, "[stopped]") && strings.Count(out, "> ") >= 3 })

	type_("Thanks\r")
	scr.waitFor(t, "the end of the third answer", func(out string) bool { return turnEnds(out) == 3 && strings.Count(out, "> ") >= 4 })
	type_("\x04") // Ctrl-D at the start of a line: the end of input
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("exec -chat ended with %v, want status 0\n%q", err, scr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("exec -chat did not end at Ctrl-D:\n%q", scr.String())
	}
	master.Close()
	<-copied
	out := scr.String()
	t.Logf("the screen:\n%s", out)
	after := out[strings.Index(out, "[stopped]"):]
	if !strings.Contains(after, "Thanks\r\n") || strings.Contains(out, "interrupted") {
		t.Errorf("the third turn did not follow the stopped answer, or Ctrl-C ended the program:\n%q", out)
	}
}

// copyOut copies the terminal's output to scr until the master closes.
func copyOut(master *os.File, scr *screen) {
	b := make([]byte, 4096)
	for {
		n, err := master.Read(b)
		if n > 0 {
			scr.Write(b[:n])
		}
		if err != nil {
			return
		}
	}
}
