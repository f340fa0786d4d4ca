package example

import (
	"github.com/ds4go/ds4/backends"
	"github.com/ds4go/ds4/ir"
)

// Name is the backend's registry name.
const Name = "example"

// Backend is the example backend.
type Backend struct{}

// Registering from init makes the backend available to every binary that
// imports the package (a blank import is enough).
func init() { backends.Register(Backend{}) }

// Name implements backends.Backend.
func (Backend) Name() string { return Name }

// Available implements backends.Backend: nothing to probe on the host.
func (Backend) Available() error { return nil }

// Capabilities implements backends.Backend: the ops it runs, with the
// dtypes of their operands and results; cpu-ref takes everything else.
func (Backend) Capabilities() backends.Capabilities {
	return backends.Capabilities{
		Ops: map[string][]ir.DType{
			"rmsnorm": {ir.BF16},
			"hc_pre":  {ir.BF16, ir.F32},
			// bf16 weights: the scheduler binds a weight on the backend
			// of its first reader when that backend claims it (the norm
			// weights bind here, through this device's BindWeight)
			"weight": {ir.BF16},
		},
		Fallback: "cpu-ref",
		Host:     true, // buffers are *backends.Tensor: values are handed over, not copied
	}
}

// Open implements backends.Backend. The device is cpu-ref's, under this
// backend's name: binding weights, buffers and the programs of the
// segments placed here are all its.
func (Backend) Open() (backends.Device, error) {
	ref, err := backends.Get("cpu-ref")
	if err != nil {
		return nil, err
	}
	d, err := ref.Open()
	if err != nil {
		return nil, err
	}
	return device{d}, nil
}

// device is cpu-ref's device with its own description.
type device struct{ backends.Device }

// Describe implements backends.Device.
func (device) Describe() string { return "example: the reference kernels under another name" }
