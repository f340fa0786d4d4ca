package backends

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
)

// Backend options are settings given on the command line (exec
// -backend-opt KEY=VALUE, repeated; -cuda-graphs=false is
// "cuda-graphs=false") for whichever backend reads them: SetOptions stores
// them before the devices open, a backend reads its keys with Option or
// BoolOption in Backend.Open (or later), and the caller asks Unread
// afterwards to refuse a key that no backend of the run read (a typo, or a
// backend without that setting). Process-wide, like the registry.

var (
	optMu   sync.Mutex
	optVals = map[string]string{}
	optRead = map[string]bool{}
)

// SetOptions replaces the backend options (nil clears them).
func SetOptions(opts map[string]string) {
	optMu.Lock()
	defer optMu.Unlock()
	optVals = maps.Clone(opts)
	if optVals == nil {
		optVals = map[string]string{}
	}
	optRead = map[string]bool{}
}

// Option returns the value of option key and whether it was given; asking
// marks it read.
func Option(key string) (string, bool) {
	optMu.Lock()
	defer optMu.Unlock()
	v, ok := optVals[key]
	if ok {
		optRead[key] = true
	}
	return v, ok
}

// BoolOption returns option key as a boolean (strconv.ParseBool), def when
// it was not given; a value that is not a boolean is an error naming it.
func BoolOption(key string, def bool) (bool, error) {
	v, ok := Option(key)
	if !ok {
		return def, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return def, fmt.Errorf("backend option %s=%q: not a boolean (true or false)", key, v)
	}
	return b, nil
}

// Unread lists, sorted, the options given that no backend has read.
func Unread() []string {
	optMu.Lock()
	defer optMu.Unlock()
	var out []string
	for _, k := range slices.Sorted(maps.Keys(optVals)) {
		if !optRead[k] {
			out = append(out, k)
		}
	}
	return out
}
