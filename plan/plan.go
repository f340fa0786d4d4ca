package plan

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/ds4go/ds4/internal/fileio"
	"github.com/ds4go/ds4/internal/jsonx"
	"github.com/ds4go/ds4/ir"
)

// Magic starts every plan file; Version is the format version this build
// reads and writes (2: the first line carries the content hash).
const (
	Magic   = "DS4PLAN"
	Version = 2
)

// hashPrefix introduces the content hash on the first line.
const hashPrefix = "sha256:"

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

// Encode renders the plan file. It refuses a module that the reader would
// refuse (Check), so compile never writes a plan exec cannot run.
func Encode(p *Plan) ([]byte, error) {
	if err := ir.VerifyModule(p.Module); err != nil {
		return nil, fmt.Errorf("plan: %v", err)
	}
	h := p.Header
	h.FormatVersion = Version
	if h.Passes == nil {
		h.Passes = []string{} // the reader refuses null for a list
	}
	h.Graphs = nil
	for _, g := range p.Module.Graphs {
		h.Graphs = append(h.Graphs, g.Name)
	}
	if err := Check(&Plan{Header: h, Module: p.Module}); err != nil {
		return nil, fmt.Errorf("plan: %v", err)
	}
	js, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	var body bytes.Buffer
	fmt.Fprintf(&body, "%s\n", js)
	body.WriteString(ir.Format(p.Module))
	return append([]byte(FirstLine(body.Bytes())), body.Bytes()...), nil
}

// FirstLine is the magic line that seals body, everything after it:
// "DS4PLAN 2 sha256:HEX\n" with the SHA-256 of body.
func FirstLine(body []byte) string {
	sum := sha256.Sum256(body)
	return fmt.Sprintf("%s %d %s%s\n", Magic, Version, hashPrefix, hex.EncodeToString(sum[:]))
}

// Write stores the plan through fileio.WriteFile: a regular file atomically
// (a temporary file in the same directory, synced, then renamed; nothing is
// left behind on failure), a device directly.
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

// Decode parses a plan from bytes and proves it consistent: the header's
// fields, the graphs (ir.VerifyModule), the schedule and buffer plan
// (Check), and last the content hash of the first line, which catches what
// the checks cannot (a changed epsilon, a renamed weight of the same
// shape). The hash comes last so that an edit the checks can name is
// reported by what is wrong.
func Decode(data []byte) (*Plan, error) {
	first, rest, ok := bytes.Cut(data, []byte("\n"))
	if !ok {
		return nil, fmt.Errorf("not a plan file (too short)")
	}
	sum, err := parseFirstLine(string(first))
	if err != nil {
		return nil, err
	}
	hdr, graphs, ok := bytes.Cut(rest, []byte("\n"))
	if !ok {
		return nil, fmt.Errorf("plan header line missing")
	}
	p := &Plan{}
	if err := jsonx.Decode(hdr, &p.Header); err != nil {
		return nil, fmt.Errorf("plan header: %v", err)
	}
	if p.FormatVersion != Version {
		return nil, fmt.Errorf("plan header: format_version %d, want %d", p.FormatVersion, Version)
	}
	if p.MaxBatch < 0 {
		return nil, fmt.Errorf("plan header: max_batch %d, want >= 0", p.MaxBatch)
	}
	m, err := ir.Parse(string(graphs))
	if err != nil {
		return nil, fmt.Errorf("plan graphs: %v", err)
	}
	if err := ir.VerifyModule(m); err != nil {
		return nil, fmt.Errorf("plan graphs: %v", err)
	}
	p.Module = m
	if err := Check(p); err != nil {
		return nil, fmt.Errorf("plan graphs: %v", err)
	}
	if got := sha256.Sum256(rest); !bytes.Equal(got[:], sum) {
		return nil, fmt.Errorf("content hash mismatch: the plan was edited or damaged; recompile it")
	}
	return p, nil
}

// parseFirstLine checks "DS4PLAN VERSION sha256:HEX" and returns the hash.
func parseFirstLine(line string) ([]byte, error) {
	f := strings.Fields(line)
	if len(f) < 2 || f[0] != Magic {
		return nil, fmt.Errorf("not a plan file (no %s header)", Magic)
	}
	version, err := strconv.Atoi(f[1])
	if err != nil {
		return nil, fmt.Errorf("not a plan file (no %s header)", Magic)
	}
	if version != Version {
		return nil, fmt.Errorf("plan format version %d, this build reads version %d: recompile the plan", version, Version)
	}
	var sum []byte
	if len(f) == 3 && strings.HasPrefix(f[2], hashPrefix) {
		sum, err = hex.DecodeString(strings.TrimPrefix(f[2], hashPrefix))
	}
	if len(f) != 3 || err != nil || len(sum) != sha256.Size {
		return nil, fmt.Errorf("first line %q: want %s %d %s and 64 hex digits (the content hash)", clip(line), Magic, Version, hashPrefix)
	}
	return sum, nil
}

// clip shortens a line for a message.
func clip(s string) string {
	if len(s) > 100 {
		return s[:100] + "…"
	}
	return s
}
