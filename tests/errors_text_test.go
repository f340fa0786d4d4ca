package tests

// The "exec: text prompts and chat" entries of docs/errors.md: -prompt,
// -prompt-file and -chat (cmd/exec/text.go, chat.go). The good model copy
// of the fixture has no tokenizer.json, so the cases name the tiny
// checkpoint's with -tokenizer (the missing one is an entry of its own).

import (
	"path/filepath"
	"testing"
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
