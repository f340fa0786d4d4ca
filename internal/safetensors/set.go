package safetensors

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/ds4go/ds4/internal/fileio"
)

// IndexFile is the name of the shard index of a sharded checkpoint.
const IndexFile = "model.safetensors.index.json"

// MaxIndexBytes bounds the index file: the released config's checkpoint
// lists 93,418 tensors in about 7 MB.
const MaxIndexBytes = 64 << 20

// Set is a group of opened files seen as one name space.
type Set struct {
	files   []*File
	tensors map[string]*Tensor
}

// Get returns the named tensor.
func (s *Set) Get(name string) (*Tensor, bool) {
	t, ok := s.tensors[name]
	return t, ok
}

// Names returns all tensor names, sorted.
func (s *Set) Names() []string {
	out := make([]string, 0, len(s.tensors))
	for n := range s.tensors {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Files returns the opened files.
func (s *Set) Files() []*File { return append([]*File(nil), s.files...) }

// Close closes every file of the set.
func (s *Set) Close() error {
	var errs []error
	for _, f := range s.files {
		errs = append(errs, f.Close())
	}
	s.files = nil
	return errors.Join(errs...)
}

// OpenFiles opens the given files as one set. A tensor name present in two
// files is an error.
func OpenFiles(paths ...string) (*Set, error) {
	s := &Set{tensors: map[string]*Tensor{}}
	for _, p := range paths {
		f, err := Open(p)
		if err != nil {
			s.Close()
			return nil, err
		}
		s.files = append(s.files, f)
		for _, n := range f.names {
			if old, dup := s.tensors[n]; dup {
				s.Close()
				return nil, fmt.Errorf("safetensors: tensor %q is in both %s and %s", n, old.File, p)
			}
			s.tensors[n] = f.tensors[n]
		}
	}
	return s, nil
}

// OpenDir opens a checkpoint directory. If dir holds IndexFile, its
// weight_map decides which shard each listed tensor comes from (every shard
// it names must exist and hold the tensors listed for it; tensors of a shard
// that the index does not list are added too, if their name is not taken).
// Otherwise dir/model.safetensors is opened, or, if absent, every
// model*.safetensors file of dir.
func OpenDir(dir string) (*Set, error) {
	idxPath := filepath.Join(dir, IndexFile)
	b, err := fileio.ReadFile(idxPath, MaxIndexBytes)
	if errors.Is(err, os.ErrNotExist) {
		single := filepath.Join(dir, "model.safetensors")
		if _, err := os.Stat(single); err == nil {
			return OpenFiles(single)
		}
		paths, err := filepath.Glob(filepath.Join(dir, "model*.safetensors"))
		if err != nil {
			return nil, fmt.Errorf("safetensors: %s: %w", dir, err)
		}
		if len(paths) == 0 {
			return nil, fmt.Errorf("safetensors: %s: no %s and no model*.safetensors files", dir, IndexFile)
		}
		sort.Strings(paths)
		return OpenFiles(paths...)
	}
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	var idx struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(b, &idx); err != nil {
		return nil, fmt.Errorf("safetensors: %s: invalid index JSON: %w", idxPath, err)
	}
	if idx.WeightMap == nil {
		return nil, fmt.Errorf("safetensors: %s: index has no weight_map", idxPath)
	}
	shardNames := map[string][]string{} // shard -> tensors listed
	for t, sh := range idx.WeightMap {
		shardNames[sh] = append(shardNames[sh], t)
	}
	shards := make([]string, 0, len(shardNames))
	for sh := range shardNames {
		if sh == "" || sh == "." || sh == ".." || filepath.IsAbs(sh) || filepath.Base(sh) != sh {
			return nil, fmt.Errorf("safetensors: %s: invalid shard name %q", idxPath, sh)
		}
		shards = append(shards, sh)
	}
	sort.Strings(shards)
	s := &Set{tensors: map[string]*Tensor{}}
	byFile := map[string]*File{}
	for _, sh := range shards {
		p := filepath.Join(dir, sh)
		if _, err := os.Stat(p); err != nil {
			s.Close()
			return nil, fmt.Errorf("safetensors: %s: shard %s (tensor %q) is missing: %w", idxPath, sh, shardNames[sh][0], err)
		}
		f, err := Open(p)
		if err != nil {
			s.Close()
			return nil, err
		}
		s.files = append(s.files, f)
		byFile[sh] = f
	}
	for _, sh := range shards {
		f := byFile[sh]
		names := shardNames[sh]
		sort.Strings(names)
		for _, n := range names {
			t, ok := f.tensors[n]
			if !ok {
				s.Close()
				return nil, fmt.Errorf("safetensors: %s: tensor %q listed in %s is absent from the shard", f.Path, n, idxPath)
			}
			s.tensors[n] = t
		}
	}
	// Tensors not listed in the index.
	extra := map[string]string{}
	for _, sh := range shards {
		f := byFile[sh]
		for _, n := range f.names {
			if _, listed := idx.WeightMap[n]; listed {
				continue
			}
			if other, dup := extra[n]; dup {
				s.Close()
				return nil, fmt.Errorf("safetensors: tensor %q (not in %s) is in both %s and %s", n, idxPath, other, f.Path)
			}
			extra[n] = f.Path
			s.tensors[n] = f.tensors[n]
		}
	}
	return s, nil
}
