package bench

import (
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/ds4go/ds4/backends"
	"github.com/ds4go/ds4/backends/cpu/fast"
)

// ProbeBandwidth returns the best of passes streaming reads of a buffer of
// the given size (≫ the last-level cache) by GOMAXPROCS goroutines, in
// bytes per second.
func ProbeBandwidth(bytes int64, passes int) float64 {
	n := int(bytes / 4)
	buf := make([]float32, n)
	p := runtime.GOMAXPROCS(0)
	chunk := (n + p - 1) / p
	var wg sync.WaitGroup
	for i := range p {
		wg.Add(1)
		go func() { // touch the pages from the goroutine that reads them
			defer wg.Done()
			part := buf[min(i*chunk, n):min((i+1)*chunk, n)]
			for j := range part {
				part[j] = float32(j&7) * 0.125
			}
		}()
	}
	wg.Wait()
	best := 0.0
	sums := make([]float32, p)
	for range max(passes, 1) {
		t0 := time.Now()
		for i := range p {
			wg.Add(1)
			go func() {
				defer wg.Done()
				part := buf[min(i*chunk, n):min((i+1)*chunk, n)]
				var s float32
				// a·a over 64 KiB blocks reads every byte once from memory.
				for j := 0; j < len(part); j += 16384 {
					blk := part[j:min(j+16384, len(part))]
					s += fast.Dot(blk, blk)
				}
				sums[i] = s
			}()
		}
		wg.Wait()
		if bw := float64(n*4) / time.Since(t0).Seconds(); bw > best {
			best = bw
		}
	}
	runtime.KeepAlive(sums)
	return best
}

// ReadRSS returns VmRSS, RssAnon, RssFile and VmHWM of this process from
// /proc/self/status in bytes (zeros where unavailable).
func ReadRSS() (rss, anon, file, peak int64) {
	m, _ := backends.ProcKiB("/proc/self/status")
	return m["VmRSS"], m["RssAnon"], m["RssFile"], m["VmHWM"]
}

// readFilePmdMapped returns FilePmdMapped of /proc/self/smaps_rollup in
// bytes (0 where unavailable).
func readFilePmdMapped() int64 {
	m, _ := backends.ProcKiB("/proc/self/smaps_rollup")
	return m["FilePmdMapped"]
}

// resetPeakRSS resets VmHWM to the current RSS (writing 5 to
// /proc/self/clear_refs), so that the next ReadRSS reports the peak since;
// where the kernel refuses, VmHWM stays the process's peak.
func resetPeakRSS() {
	f, err := os.OpenFile("/proc/self/clear_refs", os.O_WRONLY, 0)
	if err != nil {
		return
	}
	f.WriteString("5")
	f.Close()
}
