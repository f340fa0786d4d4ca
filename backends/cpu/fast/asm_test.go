package fast

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestAVX2KernelsUseAVX2Registers checks the generated assembly: no kernel
// of the AVX2 level may use AVX-512 registers (Y16–Y31, Z, K), which avo
// hands out when a kernel needs more than 16 vector registers and which
// fault on AVX2-only CPUs.
func TestAVX2KernelsUseAVX2Registers(t *testing.T) {
	src, err := os.ReadFile("kernels_amd64.s")
	if err != nil {
		t.Fatal(err)
	}
	evex := regexp.MustCompile(`\b(Y(1[6-9]|2[0-9]|3[01])|Z[0-9]+|K[1-7])\b`)
	name := ""
	for i, line := range strings.Split(string(src), "\n") {
		if strings.HasPrefix(line, "TEXT ") {
			name = line
			continue
		}
		if strings.Contains(name, "AVX2") && !strings.HasPrefix(strings.TrimSpace(line), "//") && evex.MatchString(line) {
			t.Errorf("kernels_amd64.s:%d: %s uses an AVX-512 register: %s", i+1, strings.Fields(name)[1], strings.TrimSpace(line))
		}
	}
}
