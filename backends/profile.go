package backends

// Profiler is implemented by devices that time their own work (a GPU):
// the benchmark asks for it with a type assertion and reports what it
// gives next to the wall-clock figures. Devices that are not profilers
// are measured by wall time alone.
type Profiler interface {
	// ProbeBandwidth measures the device's own memory bandwidth: a
	// device-to-device copy of bytes (read + write counted), best of a few,
	// in bytes per second.
	ProbeBandwidth(bytes int64) (float64, error)
	// Counters returns what the device has launched since it was opened.
	Counters() Counters
}

// Counters counts a device's launches. Kernels counts every kernel run,
// those replayed from a captured graph included, so kernels per step
// read the same with graphs on and off.
type Counters struct {
	Kernels       int64 // kernels run (launched directly or replayed)
	Launches      int64 // kernel launches made by the host
	GraphReplays  int64 // captured graphs launched
	GraphCaptures int64 // graphs captured (and instantiated)
}
