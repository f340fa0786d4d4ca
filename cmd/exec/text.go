package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/ds4go/ds4/engine"
	"github.com/ds4go/ds4/internal/cli"
	"github.com/ds4go/ds4/internal/fileio"
	"github.com/ds4go/ds4/plan"
	"github.com/ds4go/ds4/tokenizer"
)

// Text in, text out: -prompt, -prompt-file and -chat encode with the
// checkpoint's tokenizer.json and stream the decoded answer.

// textOptions are the flags of the text modes.
type textOptions struct {
	prompt, promptFile, tokenizer, system string
	chat, thinking                        bool
	topK                                  int
	topP                                  float64
	stops                                 []string
}

// maxPromptFile bounds -prompt-file: far more text than any context holds
// (a token is a few bytes), small enough to read into memory.
const maxPromptFile = 64 << 20

// maxTopK bounds -top-k: above any vocabulary (the config allows 2^22).
const maxTopK = 1 << 30

// chatMaxLen is the conversation's maximum length without -max-len.
const chatMaxLen = 4096

func (t *textOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&t.prompt, "prompt", "", "prompt text (encoded with the checkpoint's tokenizer.json; BOS first)")
	fs.StringVar(&t.promptFile, "prompt-file", "", "read the prompt text from this UTF-8 file")
	fs.StringVar(&t.tokenizer, "tokenizer", "", "tokenizer.json to use (default: the checkpoint's)")
	fs.BoolVar(&t.chat, "chat", false, "interactive conversation on standard input: Ctrl-C stops an answer, Ctrl-D (or Ctrl-C twice at the prompt) ends")
	fs.StringVar(&t.system, "system", "", "system prompt of the conversation")
	fs.BoolVar(&t.thinking, "thinking", false, "the model thinks (<think> … </think>) before it answers")
	fs.IntVar(&t.topK, "top-k", 0, "sample among the K most likely tokens only (0: all)")
	fs.Float64Var(&t.topP, "top-p", 1, "sample among the most likely tokens whose probability reaches P, in (0, 1]")
	fs.Func("stop", "stop the answer at this `STRING` (repeatable, or a comma-separated list)", func(v string) error {
		for _, s := range strings.Split(v, ",") {
			if s == "" {
				return fmt.Errorf("empty stop string")
			}
			t.stops = append(t.stops, s)
		}
		return nil
	})
}

// on reports whether a text mode was asked for.
func (t *textOptions) on(set map[string]bool) bool {
	return set["prompt"] || set["prompt-file"] || set["chat"]
}

// check refuses text flags out of range or in the wrong company.
func (t *textOptions) check(set map[string]bool) error {
	var given []string
	for _, f := range []string{"chat", "prompt", "prompt-file", "prompt-ids", "trace-in"} {
		if set[f] {
			given = append(given, "-"+f)
		}
	}
	if len(given) > 1 {
		return fmt.Errorf("give one of -prompt, -prompt-file, -chat, -prompt-ids or -trace-in (got %s)", strings.Join(given, " and "))
	}
	if !t.on(set) {
		for _, f := range []string{"tokenizer", "stop"} {
			if set[f] {
				return fmt.Errorf("-%s only makes sense with -prompt, -prompt-file or -chat", f)
			}
		}
	}
	for _, err := range []error{
		cli.Needs(set, "chat", "system", "thinking"),
		cli.Excludes(set, "chat", "a conversation records no ids", "dump", "trace-out"),
		cli.Excludes(set, "prompt", "text prompts record no ids; use -prompt-ids", "dump", "trace-out"),
		cli.Excludes(set, "prompt-file", "text prompts record no ids; use -prompt-ids", "dump", "trace-out"),
		cli.IntRange("top-k", int64(t.topK), 0, maxTopK, "above any vocabulary"),
	} {
		if err != nil {
			return err
		}
	}
	if !(t.topP > 0 && t.topP <= 1) { // also NaN
		return fmt.Errorf("-top-p %v: must be in (0, 1]", t.topP)
	}
	if set["prompt"] && t.prompt == "" {
		return fmt.Errorf("-prompt is empty")
	}
	return nil
}

// promptText is the text of -prompt or -prompt-file.
func (t *textOptions) promptText() (string, error) {
	if t.promptFile == "" {
		return t.prompt, nil
	}
	b, err := fileio.ReadFile(t.promptFile, maxPromptFile)
	if err != nil {
		return "", fmt.Errorf("-prompt-file %v", err)
	}
	if off := fileio.InvalidUTF8(b); off >= 0 {
		return "", fmt.Errorf("-prompt-file %s: invalid UTF-8 at byte offset %d", t.promptFile, off)
	}
	if len(b) == 0 {
		return "", fmt.Errorf("-prompt-file %s: the file is empty", t.promptFile)
	}
	return string(b), nil
}

// vocabulary is the tokenizer and the ids the modes need from it.
type vocabulary struct {
	tok      *tokenizer.Tokenizer
	path     string
	bos, eos int64
}

// loadVocabulary loads -tokenizer or the checkpoint's tokenizer.json and
// finds its begin and end of sentence tokens.
func loadVocabulary(path, dir string) (*vocabulary, error) {
	if path == "" {
		path = filepath.Join(dir, "tokenizer.json")
	}
	tok, err := tokenizer.Load(path)
	if err != nil {
		return nil, err
	}
	v := &vocabulary{tok: tok, path: path}
	var ok bool
	if v.bos, ok = tok.ID(bosToken); !ok {
		return nil, fmt.Errorf("%s: no token %q (begin of sentence)", path, bosToken)
	}
	if v.eos, ok = tok.ID(eosToken); !ok {
		return nil, fmt.Errorf("%s: no token %q (end of sentence)", path, eosToken)
	}
	return v, nil
}

// fits refuses a tokenizer with ids the model has no embedding for.
func (v *vocabulary) fits(m *engine.Model) error {
	if n := v.tok.VocabSize(); n > m.Vocab {
		return fmt.Errorf("%s: %d token ids, more than the model's vocabulary of %d", v.path, n, m.Vocab)
	}
	return nil
}

// answer is how one generation went.
type answer struct {
	gen    *engine.Generation
	reason string // "end" (end of sentence), "stop" (a stop string), "stopped" (interrupted), "length"
	last   int64  // the last sample (generated but not fed)
}

// stream generates from ids on sess, writing the text to out as it is
// decoded, until the end of sentence, a stop string, maxNew tokens or
// interrupted() (checked after each token; nil: never).
func (v *vocabulary) stream(sess *engine.Session, ids []int64, o engine.GenerateOptions, stops []string, out io.Writer, interrupted func() bool) (*answer, error) {
	dec := v.tok.NewStreamDecoder(stops)
	a := &answer{reason: "length"}
	o.Each = func(next []int64) bool {
		a.last = next[0]
		if a.last == v.eos {
			a.reason = "end"
			return true
		}
		text, stopped := dec.Add(a.last)
		io.WriteString(out, text)
		switch {
		case stopped:
			a.reason = "stop"
		case interrupted != nil && interrupted():
			a.reason = "stopped"
		default:
			return false
		}
		return true
	}
	g, err := sess.Generate([][]int64{ids}, o)
	if err != nil {
		return nil, err
	}
	if a.reason != "stop" {
		io.WriteString(out, dec.Flush())
	}
	a.gen = g
	return a, nil
}

// runText runs -prompt, -prompt-file or -chat.
func runText(o *options, p *plan.Plan, md modelDir) error {
	v, err := loadVocabulary(o.text.tokenizer, md.path)
	if err != nil {
		return md.wrap(err)
	}
	var ids []int64
	if o.text.chat {
		if o.maxLen == 0 {
			o.maxLen = chatMaxLen
		}
	} else {
		text, err := o.text.promptText()
		if err != nil {
			return err
		}
		ids = append([]int64{v.bos}, v.tok.Encode(text)...)
		if o.maxLen == 0 {
			o.maxLen = len(ids) + o.maxNew
		}
		if len(ids)+o.maxNew > o.maxLen {
			return fmt.Errorf("prompt of %d tokens + %d new tokens exceeds -max-len %d", len(ids), o.maxNew, o.maxLen)
		}
	}
	model, err := engine.Open(p.Module, md.path, o.backend)
	if err != nil {
		return md.wrap(err)
	}
	defer model.Close()
	if err := checkUnread(o.backend); err != nil {
		return err
	}
	if err := v.fits(model); err != nil {
		return err
	}
	if err := checkOutputs(*o); err != nil {
		return err
	}
	sess, err := model.NewSession(engine.Options{Batch: 1, MaxLen: o.maxLen, PrefillLen: len(ids), PrefillChunk: o.prefillChunk, FullRows: o.fullRows, MaxMemory: o.maxMemory})
	if err != nil {
		return err
	}
	defer sess.Close()
	gen := engine.GenerateOptions{MaxNew: o.maxNew, Sampling: o.sampling(), Seed: o.seed}
	if o.text.chat {
		return chat(&conversation{sess: sess, v: v, gen: gen, opt: &o.text, maxLen: o.maxLen}, os.Stdin, os.Stdout)
	}
	a, err := v.stream(sess, ids, gen, o.text.stops, os.Stdout, nil)
	if err != nil {
		return err
	}
	fmt.Println()
	printTimes(1, len(ids), a.gen.DecodeSteps, a.gen.Prefill, a.gen.Decode)
	return nil
}
