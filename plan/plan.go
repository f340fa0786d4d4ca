package plan

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/ds4go/ds4/internal/fileio"
	"github.com/ds4go/ds4/ir"
)

// Magic starts every plan file; Version is the format version this build
// reads and writes.
const (
	Magic   = "DS4PLAN"
	Version = 1
)

// Header is the JSON line after the magic line.
type Header struct {
	FormatVersion     int             `json:"format_version"`
	Model             string          `json:"model"`
	ConfigFingerprint string          `json:"config_fingerprint"`
	ModelDir          string          `json:"model_dir,omitempty"` // absolute; empty for a shape-only compile
	Backend           string          `json:"backend"`
	Passes            []string        `json:"passes"`
	Graphs            []string        `json:"graphs"`
	Config            json.RawMessage `json:"config,omitempty"`
	MaxBatch          int             `json:"max_batch,omitempty"` // largest batch exec may run; 0 = unlimited
}

// Plan is a header and the verified module.
type Plan struct {
	Header
	Module *ir.Module
}

// Encode renders the plan file.
func Encode(p *Plan) ([]byte, error) {
	if err := ir.VerifyModule(p.Module); err != nil {
		return nil, fmt.Errorf("plan: %v", err)
	}
	h := p.Header
	h.FormatVersion = Version
	h.Graphs = nil
	for _, g := range p.Module.Graphs {
		h.Graphs = append(h.Graphs, g.Name)
	}
	js, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "%s %d\n%s\n", Magic, Version, js)
	buf.WriteString(ir.Format(p.Module))
	return buf.Bytes(), nil
}

// Write stores the plan atomically: a temporary file in the same directory,
// synced, then renamed; nothing is left behind on failure.
func Write(path string, p *Plan) error {
	data, err := Encode(p)
	if err != nil {
		return err
	}
	return fileio.WriteFile(path, data)
}

// Read loads and verifies a plan file.
func Read(path string) (*Plan, error) {
	data, err := fileio.ReadFile(path, 64<<20) // 90× the plan of the released config (732 KB)
	if err != nil {
		return nil, err
	}
	p, err := Decode(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return p, nil
}

// Decode parses a plan from bytes.
func Decode(data []byte) (*Plan, error) {
	r := bufio.NewReader(bytes.NewReader(data))
	first, err := r.ReadString('\n')
	if err != nil {
		return nil, fmt.Errorf("not a plan file (too short)")
	}
	var magic string
	var version int
	if n, _ := fmt.Sscanf(strings.TrimSpace(first), "%s %d", &magic, &version); n != 2 || magic != Magic {
		return nil, fmt.Errorf("not a plan file (no %s header)", Magic)
	}
	if version != Version {
		return nil, fmt.Errorf("plan format version %d, this build reads version %d: recompile the plan", version, Version)
	}
	hdr, err := r.ReadString('\n')
	if err != nil {
		return nil, fmt.Errorf("plan header line missing")
	}
	p := &Plan{}
	if err := json.Unmarshal([]byte(hdr), &p.Header); err != nil {
		return nil, fmt.Errorf("plan header: %v", err)
	}
	if p.FormatVersion != Version {
		return nil, fmt.Errorf("plan header: format_version %d, want %d", p.FormatVersion, Version)
	}
	if p.MaxBatch < 0 {
		return nil, fmt.Errorf("plan header: max_batch %d, want >= 0", p.MaxBatch)
	}
	rest := data[len(first)+len(hdr):]
	m, err := ir.Parse(string(rest))
	if err != nil {
		return nil, fmt.Errorf("plan graphs: %v", err)
	}
	if err := ir.VerifyModule(m); err != nil {
		return nil, fmt.Errorf("plan graphs: %v", err)
	}
	for _, name := range p.Graphs {
		if m.Graph(name) == nil {
			return nil, fmt.Errorf("plan header lists graph %q that the file does not hold", name)
		}
	}
	p.Module = m
	return p, nil
}
