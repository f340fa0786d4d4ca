package engine

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/ds4go/ds4/internal/safetensors"
	"github.com/ds4go/ds4/models/deepseekv4"
	"github.com/ds4go/ds4/tokenizer"
)

// TokenizerFile is the checkpoint's tokenizer. When the checkpoint has no
// TokenMapFile, the Engram token map is derived from it
// (deepseekv4.EngramTokenMap), as the reference builds the map.
const TokenizerFile = "tokenizer.json"

// derivedTokenMap derives dir's Engram token map from its tokenizer.json
// when dir has no TokenMapFile; ok is false when it has one, or has no
// tokenizer either. The map must have the config's
// engram_compressed_vocab_size compressed ids and one entry per raw id.
func derivedTokenMap(dir string, cfg *deepseekv4.Config) (m []int64, ok bool, err error) {
	if _, err := os.Stat(filepath.Join(dir, TokenMapFile)); !errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	path := filepath.Join(dir, TokenizerFile)
	st, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	key := derivedKey{path: path, cfgVocab: cfg.EngramCompressedVocabSize, size: -1}
	if err == nil {
		key.size, key.mod = st.Size(), st.ModTime()
	}
	if m := lastDerived.get(key); m != nil {
		return m, true, nil
	}
	tok, err := tokenizer.Load(path)
	if err != nil {
		return nil, true, err
	}
	m, count := deepseekv4.EngramTokenMap(tok)
	if int64(count) != cfg.EngramCompressedVocabSize {
		return nil, true, fmt.Errorf("%s: the Engram token map derived from it has %d compressed ids, but %s says engram_compressed_vocab_size = %d (and there is no %s)",
			path, count, filepath.Join(dir, "config.json"), cfg.EngramCompressedVocabSize, TokenMapFile)
	}
	if err := cfg.CheckTokenMap(m, nil); err != nil {
		return nil, true, fmt.Errorf("%s: the Engram token map derived from it %v", path, err)
	}
	lastDerived.put(key, m)
	return m, true, nil
}

// lastDerived keeps the last map derived (and checked), so that CheckPlan
// and then Open on the same checkpoint derive it once (about 1 s on a
// 129k-token vocabulary). It is keyed by the tokenizer file's path, size
// and modification time, and the config's compressed vocabulary size.
var lastDerived derivedMemo

type derivedKey struct {
	path     string
	size     int64
	mod      time.Time
	cfgVocab int64
}

type derivedMemo struct {
	mu  sync.Mutex
	key derivedKey
	m   []int64
}

// get returns the memo's map for key, or nil; the caller must not modify it.
func (d *derivedMemo) get(k derivedKey) []int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	if k.size < 0 || !d.key.mod.Equal(k.mod) || d.key.path != k.path || d.key.size != k.size || d.key.cfgVocab != k.cfgVocab {
		return nil
	}
	return d.m
}

func (d *derivedMemo) put(k derivedKey, m []int64) {
	if k.size < 0 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.key, d.m = k, m
}

// derivedTokenMapTensor is the derived map as the token map file's tensor.
func (b *binder) derivedTokenMapTensor(name string) (*safetensors.Tensor, bool, error) {
	if b.derived == nil {
		if _, err := os.Stat(filepath.Join(b.dir, TokenMapFile)); !errors.Is(err, fs.ErrNotExist) {
			return nil, false, nil // the file is read (binder.tokenMap)
		}
		cfg, err := deepseekv4.LoadConfig(filepath.Join(b.dir, "config.json"))
		if err != nil {
			return nil, false, err
		}
		m, ok, err := derivedTokenMap(b.dir, cfg)
		if !ok || err != nil {
			return nil, ok, err
		}
		b.derived = &safetensors.Tensor{Name: name, DType: "I64", Shape: []int{len(m)}, Data: safetensors.I64Bytes(m),
			File: filepath.Join(b.dir, TokenizerFile)}
	}
	return b.derived, true, nil
}
