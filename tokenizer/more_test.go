package tokenizer

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestAPI(t *testing.T) {
	tok := loadDeepSeek(t)
	if got := tok.VocabSize(); got != 128815 {
		t.Errorf("VocabSize = %d, want 128815 (added tokens reach id 128814)", got)
	}
	id, ok := tok.ID("<｜begin▁of▁sentence｜>")
	if !ok || id != 0 {
		t.Errorf("ID(BOS) = %d, %v; want 0", id, ok)
	}
	if id, ok := tok.ID("<｜User｜>"); !ok || id != 128803 {
		t.Errorf("ID(<｜User｜>) = %d, %v; want 128803", id, ok)
	}
	if s, ok := tok.TokenString(223); !ok || s != "Ġ" {
		t.Errorf("TokenString(223) = %q, %v; want \"Ġ\"", s, ok)
	}
	if _, ok := tok.TokenString(-1); ok {
		t.Error("TokenString(-1) found a token")
	}
	if _, ok := tok.TokenString(1 << 40); ok {
		t.Error("TokenString(2^40) found a token")
	}
	if got := tok.Decode([]int64{0, 19923, 1 << 40, -5}); got != "<｜begin▁of▁sentence｜>Hello" {
		t.Errorf("Decode skipping unknown ids = %q", got)
	}
}

// TestDecodeInvalidUTF8: a lone piece of a multi-byte character decodes
// to U+FFFD, one per maximal ill-formed subpart as Hugging Face does.
func TestDecodeInvalidUTF8(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"\xe4\xbd", "\uFFFD"},
		{"\xe4\xbdA", "\uFFFDA"},
		{"\xff\xfe", "\uFFFD\uFFFD"},
		{"\xed\xa0\x80", "\uFFFD\uFFFD\uFFFD"}, // a surrogate: each byte alone
		{"\xf0\x9f\x98", "\uFFFD"},
		{"ok\xc3", "ok\uFFFD"},
	} {
		if got := string(appendLossy(nil, []byte(c.in))); got != c.want {
			t.Errorf("appendLossy(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestIncompleteTail: a stream holds back only the start of a character
// that later bytes can complete; a byte no sequence starts with (0xC0,
// 0xF5-0xFF) or an already ill-formed tail goes out at once.
func TestIncompleteTail(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
	}{
		{"", 0}, {"ab", 0}, {"a\xc3", 1}, {"a\xe4\xbd", 2}, {"\xf0\x9f\x98", 3},
		{"\xf0\x9f\x98\x80", 0}, {"a\xc0", 0}, {"a\xff", 0}, {"\xe4A", 0},
		{"\xed\xa0", 0}, {"\xbd", 0}, {"\x80\x80\x80", 0},
	} {
		if got := incompleteTail([]byte(c.in)); got != c.want {
			t.Errorf("incompleteTail(%q) = %d, want %d", c.in, got, c.want)
		}
	}
}

func TestStreamDecoder(t *testing.T) {
	tok := loadDeepSeek(t)
	text := "Hi 👨‍👩‍👧 你好 and then STOP here"
	ids := tok.Encode(text)
	d := tok.NewStreamDecoder([]string{"STOP", "never"})
	var got strings.Builder
	stopped := false
	for _, id := range ids {
		s, st := d.Add(id)
		if !utf8.ValidString(s) || strings.ContainsRune(s, utf8.RuneError) {
			t.Fatalf("Add emitted %q: not complete UTF-8", s)
		}
		got.WriteString(s)
		if st {
			stopped = true
			break
		}
	}
	if !stopped || got.String() != "Hi 👨‍👩‍👧 你好 and then " {
		t.Errorf("stream = %q, stopped %v", got.String(), stopped)
	}
	// Without stops the stream is the whole decode, and "ST" is held back
	// only while it may begin a stop string.
	d = tok.NewStreamDecoder(nil)
	got.Reset()
	for _, id := range ids {
		s, _ := d.Add(id)
		got.WriteString(s)
	}
	got.WriteString(d.Flush())
	if got.String() != text {
		t.Errorf("stream without stops = %q", got.String())
	}
	d = tok.NewStreamDecoder([]string{"STOP"})
	st := tok.Encode("x ST")
	var out string
	for _, id := range st {
		s, _ := d.Add(id)
		out += s
	}
	if out != "x " || d.Flush() != "ST" {
		t.Errorf("held-back prefix: emitted %q", out)
	}
}

func TestBadTokenizerJSON(t *testing.T) {
	base := func(model, extra string) string {
		return `{"added_tokens":[` + extra + `],"normalizer":null,"pre_tokenizer":{"type":"ByteLevel","add_prefix_space":false,"use_regex":false},"decoder":{"type":"ByteLevel"},"model":` + model + `}`
	}
	okModel := `{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":["a b"]}`
	for _, c := range []struct{ name, json, want string }{
		{"unknown model", base(`{"type":"WordPiece","vocab":{"a":0}}`, ""), `model type "WordPiece" is not supported`},
		{"merge unknown", base(`{"type":"BPE","vocab":{"a":0,"ab":2},"merges":["a b"]}`, ""), `names "b", which is not in the vocabulary`},
		{"merge result unknown", base(`{"type":"BPE","vocab":{"a":0,"b":1},"merges":[["a","b"]]}`, ""), `makes "ab", which is not in the vocabulary`},
		{"duplicate vocab id", base(`{"type":"BPE","vocab":{"a":0,"b":0},"merges":[]}`, ""), `vocabulary tokens "a" and "b" have the same id 0`},
		{"duplicate added id", base(okModel, `{"id":5,"content":"<x>"},{"id":5,"content":"<y>"}`), `added tokens "<x>" and "<y>" have the same id 5`},
		{"added clashes vocab", base(okModel, `{"id":1,"content":"<x>"}`), `added token "<x>" and vocabulary token "b" have the same id 1`},
		{"bad merge", base(`{"type":"BPE","vocab":{"a":0},"merges":[3]}`, ""), `merge 0 is neither`},
		{"not json", `{`, "not a tokenizer.json"},
	} {
		_, err := Parse([]byte(c.json), "bad.json")
		if err == nil || !strings.HasPrefix(err.Error(), "bad.json: ") || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: err = %v, want one line naming bad.json and %q", c.name, err, c.want)
		}
	}
	tok, err := Parse([]byte(base(okModel, "")), "ok.json")
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(tok.Encode("abab a")); got != "[2 2 0]" {
		t.Errorf("tiny BPE Encode = %s (the space has no token and is dropped)", got)
	}
}

// FuzzRoundTrip: decoding the encoding of any valid UTF-8 text gives it back.
func FuzzRoundTrip(f *testing.F) {
	for _, s := range []string{"", "Hello, world!", "  \n\r\n\t x", "你好 123456 ｶﾀ", "👨‍👩‍👧 e\u0301", "<｜User｜>hi<｜Assistant｜>"} {
		f.Add(s)
	}
	tok := loadDeepSeek(f)
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return
		}
		if got := tok.Decode(tok.Encode(s)); got != s {
			t.Errorf("Decode(Encode(%q)) = %q", s, got)
		}
	})
}

// TestStreamGolden: streaming each golden vector id by id emits complete
// UTF-8 only, and all of it is the one-call decode.
func TestStreamGolden(t *testing.T) {
	tok := loadDeepSeek(t)
	for i, g := range loadGolden(t) {
		d := tok.NewStreamDecoder([]string{"\x00never"})
		var got strings.Builder
		for _, id := range g.IDs {
			s, stopped := d.Add(id)
			if stopped || !utf8.ValidString(s) || strings.ContainsRune(s, utf8.RuneError) {
				t.Fatalf("vector %d: Add emitted %q (stopped %v)", i, s, stopped)
			}
			got.WriteString(s)
		}
		got.WriteString(d.Flush())
		if got.String() != g.Text {
			t.Errorf("vector %d: stream %q, want %q", i, got.String(), g.Text)
		}
	}
}

// TestAddedTokenFlags: lstrip and rstrip take the whitespace beside an added
// token into it; a single_word token matches only as a whole word.
func TestAddedTokenFlags(t *testing.T) {
	mk := func(flags string) *Tokenizer {
		j := `{"added_tokens":[{"id":4,"content":"<x>"` + flags + `}],"normalizer":null,` +
			`"pre_tokenizer":{"type":"ByteLevel","add_prefix_space":false,"use_regex":false},"decoder":{"type":"ByteLevel"},` +
			`"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2,"Ġ":3},"merges":["a b"]}}`
		tok, err := Parse([]byte(j), "flags.json")
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	for _, c := range []struct{ flags, text, want string }{
		{"", "ab <x> ab", "[2 3 4 3 2]"},
		{`,"lstrip":true`, "ab <x> ab", "[2 4 3 2]"},
		{`,"lstrip":true,"rstrip":true`, "ab  <x>  ab", "[2 4 2]"},
		{`,"single_word":true`, "ab <x> ab", "[2 3 4 3 2]"},
		{`,"single_word":true`, "ab<x>", "[2]"}, // not a word: "<x>" has no tokens of its own
	} {
		if got := fmt.Sprint(mk(c.flags).Encode(c.text)); got != c.want {
			t.Errorf("flags %q, Encode(%q) = %s, want %s", c.flags, c.text, got, c.want)
		}
	}
}
