package tokenizer

import (
	"encoding/json"
	"fmt"

	"golang.org/x/text/unicode/norm"
	"strings"
)

// preStep is one pre-tokenizer: it cuts each piece into smaller ones.
type preStep func(pieces []string) []string

type preJSON struct {
	Type           string            `json:"type"`
	Pretokenizers  []json.RawMessage `json:"pretokenizers"`
	Pattern        map[string]string `json:"pattern"`
	Behavior       string            `json:"behavior"`
	Invert         bool              `json:"invert"`
	AddPrefixSpace bool              `json:"add_prefix_space"`
	UseRegex       bool              `json:"use_regex"`
}

func (t *Tokenizer) setPreTokenizer(raw json.RawMessage) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var p preJSON
	if err := json.Unmarshal(raw, &p); err != nil {
		return fmt.Errorf("pre_tokenizer: %v", err)
	}
	if t.byteLevel {
		return fmt.Errorf("pre_tokenizer: ByteLevel must be the last pre-tokenizer")
	}
	switch p.Type {
	case "Sequence":
		for _, sub := range p.Pretokenizers {
			if err := t.setPreTokenizer(sub); err != nil {
				return err
			}
		}
		return nil
	case "ByteLevel":
		t.byteLevel, t.prefixSp, t.byteRegex = true, p.AddPrefixSpace, p.UseRegex
		return nil
	case "Split":
		step, err := newSplit(p)
		if err != nil {
			return fmt.Errorf("pre_tokenizer: Split: %v", err)
		}
		t.pretok = append(t.pretok, step)
		return nil
	}
	return fmt.Errorf("pre_tokenizer %q is not supported", p.Type)
}

func newSplit(p preJSON) (preStep, error) {
	if p.Invert {
		return nil, fmt.Errorf("invert true is not supported")
	}
	pat, isRegex := p.Pattern["Regex"]
	if !isRegex {
		var ok bool
		if pat, ok = p.Pattern["String"]; !ok {
			return nil, fmt.Errorf("pattern is neither Regex nor String")
		}
	}
	find, err := newSplitter(pat, isRegex)
	if err != nil {
		return nil, fmt.Errorf("pattern %q: %v", pat, err)
	}
	var keepMatch bool
	switch p.Behavior {
	case "Isolated":
		keepMatch = true
	case "Removed":
	default:
		return nil, fmt.Errorf("behavior %q is not supported (only Isolated and Removed)", p.Behavior)
	}
	if keepMatch {
		return func(pieces []string) []string { return splitIsolated(pieces, find) }, nil
	}
	return func(pieces []string) []string { return splitRemoved(pieces, find) }, nil
}

var gpt2Splitter = scanAll(gpt2Match)

// splitIsolated cuts each piece at the matches of find, keeping the matches
// as pieces of their own.
func splitIsolated(pieces []string, find splitter) []string { return splitPieces(pieces, find, true) }

// splitRemoved cuts each piece at the matches of find, dropping them.
func splitRemoved(pieces []string, find splitter) []string { return splitPieces(pieces, find, false) }

func splitPieces(pieces []string, find splitter, keepMatch bool) []string {
	var out []string
	for _, s := range pieces {
		at := 0
		for _, m := range find(s) {
			if m[0] > at {
				out = append(out, s[at:m[0]])
			}
			if keepMatch {
				out = append(out, s[m[0]:m[1]])
			}
			at = m[1]
		}
		if at < len(s) {
			out = append(out, s[at:])
		}
	}
	return out
}

// normalizer maps text before pre-tokenization.
type normalizer func(string) string

func identity(s string) string { return s }

func parseNormalizer(raw json.RawMessage) (normalizer, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return identity, nil
	}
	var n struct {
		Type        string            `json:"type"`
		Normalizers []json.RawMessage `json:"normalizers"`
	}
	if err := json.Unmarshal(raw, &n); err != nil {
		return nil, fmt.Errorf("normalizer: %v", err)
	}
	switch n.Type {
	case "Sequence":
		var seq []normalizer
		for _, sub := range n.Normalizers {
			f, err := parseNormalizer(sub)
			if err != nil {
				return nil, err
			}
			seq = append(seq, f)
		}
		if len(seq) == 0 {
			return identity, nil
		}
		return func(s string) string {
			for _, f := range seq {
				s = f(s)
			}
			return s
		}, nil
	case "NFC":
		return norm.NFC.String, nil
	case "NFD":
		return norm.NFD.String, nil
	case "NFKC":
		return norm.NFKC.String, nil
	case "NFKD":
		return norm.NFKD.String, nil
	case "Lowercase":
		return strings.ToLower, nil
	}
	return nil, fmt.Errorf("normalizer %q is not supported", n.Type)
}
