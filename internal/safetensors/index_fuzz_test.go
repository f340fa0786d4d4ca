package safetensors

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzOpenDir writes two small shards and a fuzzed index into a temporary
// directory and opens it: OpenDir must not panic, and a set it accepts holds
// every tensor the index lists, from files inside the directory.
func FuzzOpenDir(f *testing.F) {
	f.Add([]byte(`{"metadata":{"total_size":16},"weight_map":{"a":"s1.safetensors","b":"s2.safetensors"}}`))
	f.Add([]byte(`{"weight_map":{"a":"s1.safetensors"}}`))
	f.Add([]byte(`{"weight_map":{"a":"s2.safetensors"}}`))
	f.Add([]byte(`{"weight_map":{"a":"../s1.safetensors"}}`))
	f.Add([]byte(`{"weight_map":{"a":"missing.safetensors"}}`))
	f.Add([]byte(`{"weight_map":{"x":".."}}`))
	f.Add([]byte(`{"weight_map":null}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`[1,2]`))
	f.Add([]byte(``))
	s1, err := Encode([]WriteTensor{{Name: "a", DType: F32, Shape: []int{2}, Data: make([]byte, 8)}, {Name: "c", DType: U8, Shape: []int{3}, Data: []byte{1, 2, 3}}}, nil)
	if err != nil {
		f.Fatal(err)
	}
	s2, err := Encode([]WriteTensor{{Name: "b", DType: I64, Shape: []int{1}, Data: make([]byte, 8)}, {Name: "c", DType: U8, Shape: []int{1}, Data: []byte{9}}}, map[string]string{"k": "v"})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, index []byte) {
		dir := t.TempDir()
		for name, data := range map[string][]byte{"s1.safetensors": s1, "s2.safetensors": s2, IndexFile: index} {
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		s, err := OpenDir(dir)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error: %q", err)
			}
			return
		}
		defer s.Close()
		for _, fl := range s.Files() {
			if filepath.Dir(fl.Path) != filepath.Clean(dir) {
				t.Fatalf("opened %s outside %s", fl.Path, dir)
			}
		}
		for _, n := range s.Names() {
			if _, ok := s.Get(n); !ok {
				t.Fatalf("Names lists %q that Get does not find", n)
			}
		}
	})
}
