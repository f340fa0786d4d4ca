//go:build linux

package tests

// The serve command itself: bad flags end it as exec's do (exit 2, one
// line), it listens where -addr says (port 0: the line it prints names the
// port), and SIGTERM drains it: an in-flight stream finishes (or, past
// -drain-timeout, ends with an error event and [DONE]), /health and new
// requests get 503 meanwhile, and it exits 0.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The serve binary, built once (TestMain builds the other commands).
var (
	serveBinOnce sync.Once
	serveBinErr  error
)

func serveBin(t *testing.T) string {
	t.Helper()
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	out := filepath.Join(binDir, "serve")
	serveBinOnce.Do(func() {
		cmd := exec.Command("go", "build", "-o", out, "./cmd/serve")
		cmd.Dir = repoRoot()
		if b, err := cmd.CombinedOutput(); err != nil {
			serveBinErr = fmt.Errorf("go build ./cmd/serve: %v\n%s", err, b)
		}
	})
	if serveBinErr != nil {
		t.Fatal(serveBinErr)
	}
	return out
}

func TestServeCmdErrors(t *testing.T) {
	serveBin(t)
	plan := tinyPlan(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "-plan is required"},
		{[]string{"-plan", plan, "-nope"}, "flag provided but not defined: -nope"},
		{[]string{"-plan", plan, "-max-batch", "0"}, "-max-batch"},
		{[]string{"-plan", plan, "-max-queue", "-1"}, "-max-queue"},
		{[]string{"-plan", plan, "-request-timeout", "-1s"}, "-request-timeout"},
		{[]string{"-plan", filepath.Join(t.TempDir(), "missing.plan")}, "no such file or directory"},
		{[]string{"-plan", plan, "-backend", "cpu", "-addr", ln.Addr().String()}, "address already in use"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			cliWantUsageError(t, runBin(t, "serve", c.args...), c.want)
		})
	}
}

// serveProc is a running serve command.
type serveProc struct {
	cmd    *exec.Cmd
	stderr *screen
	fx     *serveFixture
	exited chan error
}

// startServeCmd runs serve on the tiny plan (cpu backend) on a free port.
func startServeCmd(t *testing.T, args ...string) *serveProc {
	t.Helper()
	bin := serveBin(t)
	args = append([]string{"-plan", tinyPlan(t), "-backend", "cpu", "-addr", "127.0.0.1:0"}, args...)
	p := &serveProc{cmd: exec.Command(bin, args...), stderr: &screen{}, exited: make(chan error, 1)}
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- p.cmd.Wait() }()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.exited
	})
	at := regexp.MustCompile(`at (http://127\.0\.0\.1:\d+)\n`)
	out := p.stderr.waitFor(t, "serve's listening line", func(s string) bool { return at.MatchString(s) })
	p.fx = &serveFixture{url: at.FindStringSubmatch(out)[1]}
	code, body := serveGet(t, p.fx, "/v1/models")
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &list) != nil || len(list.Data) != 1 {
		t.Fatalf("GET /v1/models: %d %s", code, body)
	}
	p.fx.model = list.Data[0].ID
	return p
}

// wait waits for the process to exit (at most d) and returns its status.
func (p *serveProc) wait(t *testing.T, d time.Duration) int {
	t.Helper()
	select {
	case err := <-p.exited:
		p.exited <- err // for the cleanup
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(d):
		t.Fatalf("serve still running %v after SIGTERM; stderr:\n%s", d, p.stderr.String())
		return -1
	}
}

// streamRest reads an event stream to its end: the text, the finish reason
// and whether an error event came.
func streamRest(r io.Reader) (text, finish string, errEvent, done bool) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			done = true
			continue
		}
		var c struct {
			Choices []struct {
				Delta        struct{ Content string } `json:"delta"`
				FinishReason *string                  `json:"finish_reason"`
			} `json:"choices"`
			Error any `json:"error"`
		}
		if json.Unmarshal([]byte(data), &c) != nil {
			continue
		}
		if c.Error != nil {
			errEvent = true
		}
		for _, ch := range c.Choices {
			text += ch.Delta.Content
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
		}
	}
	return
}

func TestServeCmdSIGTERMDrains(t *testing.T) {
	p := startServeCmd(t, "-max-batch", "2", "-max-len", "1024", "-drain-timeout", "30s")
	disconnect, rest := openStream(t, p.fx, "finish this answer", 800)
	defer disconnect()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.stderr.waitFor(t, "the shutdown line", func(s string) bool { return strings.Contains(s, "shutting down") })
	if code, body := serveGet(t, p.fx, "/health"); code != 503 {
		t.Errorf("/health while draining: %d %s, want 503", code, body)
	}
	code, body := servePost(t, p.fx, "/v1/chat/completions", "application/json", []byte(chatBody(p.fx.model, `"max_tokens":4`)))
	if code != 503 {
		t.Errorf("a new request while draining: %d %s, want 503", code, body)
	} else {
		checkErrorBody(t, "draining", body)
	}
	_, finish, errEvent, done := streamRest(rest)
	if finish != "length" && finish != "stop" || errEvent || !done {
		t.Errorf("the in-flight stream during the drain: finish %q, error event %v, [DONE] %v", finish, errEvent, done)
	}
	if code := p.wait(t, 30*time.Second); code != 0 {
		t.Errorf("exit status %d after SIGTERM; stderr:\n%s", code, p.stderr.String())
	}
	if s := p.stderr.String(); strings.Contains(s, "panic") || strings.Contains(s, "goroutine ") {
		t.Errorf("a panic trace:\n%s", s)
	}
}

func TestServeCmdDrainTimeout(t *testing.T) {
	p := startServeCmd(t, "-max-batch", "1", "-max-len", "4096", "-drain-timeout", "200ms")
	disconnect, rest := openStream(t, p.fx, "a very long answer", 4000)
	defer disconnect()
	t0 := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	b.ReadFrom(rest)
	_, finish, errEvent, done := streamRest(&b)
	if !errEvent || !done || finish != "" {
		t.Errorf("a stream cancelled by the drain timeout: finish %q, error event %v, [DONE] %v", finish, errEvent, done)
	}
	if code := p.wait(t, 20*time.Second); code != 0 {
		t.Errorf("exit status %d after SIGTERM; stderr:\n%s", code, p.stderr.String())
	}
	t.Logf("exited %v after SIGTERM", time.Since(t0).Round(time.Millisecond))
	if !strings.Contains(p.stderr.String(), "drain timeout") {
		t.Errorf("no drain timeout line:\n%s", p.stderr.String())
	}
}
