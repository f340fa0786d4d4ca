package engine

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

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
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
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
	return m, true, nil
}

// derivedTokenMapTensor is the derived map as the token map file's tensor.
func (b *binder) derivedTokenMapTensor(name string) (*safetensors.Tensor, bool, error) {
	if b.src != nil {
		return nil, false, nil // the source has its own (binder.host)
	}
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
