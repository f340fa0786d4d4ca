package tests

// The "exec: text prompts and chat" entries of docs/errors.md: -prompt,
// -prompt-file and -chat (cmd/exec/text.go, chat.go). The good model copy
// of the fixture has no tokenizer.json, so the cases name the tiny
// checkpoint's with -tokenizer (the missing one is an entry of its own).

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ds4go/ds4/models/deepseekv4"
	"github.com/ds4go/ds4/tokenizer"
)

// textExec is an exec case of the good plan and model with the tiny
// tokenizer and these flags.
func textExec(args ...string) func(t *testing.T, fx *errsFixture, in string) []string {
	return func(t *testing.T, fx *errsFixture, in string) []string {
		return append([]string{"-plan", fx.goodPlan, "-model", fx.goodDir, "-tokenizer", textTokenizer()}, args...)
	}
}

func textTokenizer() string {
	p, _ := filepath.Abs(filepath.Join(tinyDir(), "tokenizer.json"))
	return p
}

func init() {
	errsCases = append(errsCases, []errsCase{
		{name: "prompt-file-utf8", cmd: "exec", want: "p.txt: invalid UTF-8 at byte offset 6", setup: func(t *testing.T, fx *errsFixture, in string) []string {
			return textExec("-prompt-file", errsWrite(t, filepath.Join(in, "p.txt"), "hello \xff world"))(t, fx, in)
		}},
		{name: "prompt-file-empty", cmd: "exec", want: "e.txt: the file is empty", setup: func(t *testing.T, fx *errsFixture, in string) []string {
			return textExec("-prompt-file", errsWrite(t, filepath.Join(in, "e.txt"), ""))(t, fx, in)
		}},
		{name: "text-prompt-too-long", cmd: "exec", want: "new tokens exceeds -max-len 4", setup: textExec("-prompt", "a prompt longer than four tokens", "-max-len", "4")},
		{name: "prompt-empty", cmd: "exec", want: "-prompt is empty", setup: textExec("-prompt", "")},
		{name: "prompt-and-ids", cmd: "exec", want: "give one of -prompt, -prompt-file, -chat, -prompt-ids or -trace-in (got -prompt and -prompt-ids)", setup: textExec("-prompt", "hi", "-prompt-ids", "1,2")},
		{name: "chat-and-prompt", cmd: "exec", want: "(got -chat and -prompt)", setup: textExec("-chat", "-prompt", "hi")},
		{name: "tokenizer-missing", cmd: "exec", want: "tokenizer.json: no such file or directory", setup: flagsExec("-prompt", "hi")},
		{name: "tokenizer-without-text", cmd: "exec", want: "-tokenizer only makes sense with -prompt, -prompt-file or -chat", setup: textExec("-prompt-ids", "1,2")},
		{name: "system-without-chat", cmd: "exec", want: "-system only makes sense with -chat", setup: textExec("-prompt", "hi", "-system", "be brief")},
		{name: "chat-with-dump", cmd: "exec", want: "-dump has no effect with -chat (a conversation records no ids)", setup: textExec("-chat", "-dump", "d.safetensors")},
		{name: "stop-empty", cmd: "exec", want: `invalid value "a,,b" for flag -stop: empty stop string`, setup: textExec("-prompt", "hi", "-stop", "a,,b")},
		{name: "top-p-range", cmd: "exec", want: "-top-p 1.5: must be in (0, 1]", setup: textExec("-prompt", "hi", "-temperature", "1", "-top-p", "1.5")},
		{name: "top-k-negative", cmd: "exec", want: "-top-k -1: must be ≥ 0", setup: textExec("-prompt", "hi", "-temperature", "1", "-top-k", "-1")},
		{name: "top-k-greedy", cmd: "exec", want: "-top-k only makes sense with -temperature > 0 (greedy decoding draws no random numbers)", setup: textExec("-prompt", "hi", "-top-k", "5")},
	}...)
}

// textRunIDs runs exec -prompt-ids of one row and returns its generated ids.
func textRunIDs(t *testing.T, ids []int64, args ...string) []int64 {
	t.Helper()
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatInt(id, 10)
	}
	r := runBin(t, "exec", append([]string{"-plan", tinyPlan(t), "-prompt-ids", strings.Join(s, ",")}, args...)...)
	row, ok := strings.CutPrefix(strings.TrimSpace(r.stdout), "row 0: ")
	if r.code != 0 || !ok {
		t.Fatalf("exec -prompt-ids: status %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
	}
	var out []int64
	for _, f := range strings.Split(row, ",") {
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

// TestPromptTextIsTheIDs: exec -prompt streams the decoding of what
// -prompt-ids generates from BOS + the encoded text (greedy, the same
// model); -prompt-file gives the same; a -stop string taken from that text
// ends the output just before it.
func TestPromptTextIsTheIDs(t *testing.T) {
	tok, err := tokenizer.Load(textTokenizer())
	if err != nil {
		t.Fatal(err)
	}
	const text = "The quick brown fox"
	bos, _ := tok.ID(deepseekv4.BOSToken)
	gen := textRunIDs(t, append([]int64{bos}, tok.Encode(text)...), "-max-new-tokens", "24")
	for _, id := range gen {
		if id == 1 { // the tiny tokenizer's end of sentence: -prompt would stop there
			t.Skipf("the greedy run samples the end of sentence: %v", gen)
		}
	}
	want := tok.Decode(gen)
	r := runBin(t, "exec", "-plan", tinyPlan(t), "-prompt", text, "-max-new-tokens", "24")
	if r.code != 0 || r.stdout != want+"\n" {
		t.Fatalf("-prompt: status %d, stdout %q, want %q (stderr %s)", r.code, r.stdout, want+"\n", r.stderr)
	}
	f := filepath.Join(t.TempDir(), "p.txt")
	if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := runBin(t, "exec", "-plan", tinyPlan(t), "-prompt-file", f, "-max-new-tokens", "24"); r.stdout != want+"\n" {
		t.Errorf("-prompt-file: stdout %q, want %q", r.stdout, want+"\n")
	}
	// A stop string from the middle of the answer (past its first rune).
	rs := []rune(want)
	if len(rs) < 8 {
		t.Fatalf("answer %q too short to take a stop string from", want)
	}
	stop := string(rs[len(rs)/2 : len(rs)/2+3])
	before, _, _ := strings.Cut(want, stop)
	if r := runBin(t, "exec", "-plan", tinyPlan(t), "-prompt", text, "-max-new-tokens", "24", "-stop", "zzzq,"+stop); r.stdout != before+"\n" {
		t.Errorf("-stop %q: stdout %q, want %q", stop, r.stdout, before+"\n")
	}
}

// TestChatRefusesATurnTooLong: a turn that does not fit in what is left of
// -max-len is refused with a line saying so, and the conversation goes on
// (the next, short turn is answered) and ends at the end of input, status 0.
func TestChatRefusesATurnTooLong(t *testing.T) {
	long := strings.Repeat("many words here ", 20)
	cmd := exec.Command(filepath.Join(binDir, "exec"), "-plan", tinyPlan(t), "-chat", "-max-len", "48", "-max-new-tokens", "4")
	cmd.Stdin = strings.NewReader("hi\n" + long + "\nok\n")
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	if err := cmd.Run(); err != nil {
		t.Fatalf("exec -chat: %v\n%s", err, se.String())
	}
	out := so.String()
	if !strings.Contains(out, "[refused: this turn needs ") || strings.Count(out, "[answer cut")+strings.Count(out, "[end of turn]") != 2 {
		t.Errorf("want a refused turn between two answered ones:\n%s", out)
	}
}
