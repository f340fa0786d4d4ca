package serve

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

// failingWriter is a ResponseWriter whose writes fail, as a connection
// to a client that stopped reading does once its write deadline passes.
type failingWriter struct{ *httptest.ResponseRecorder }

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("i/o timeout") }

// TestReplyWriteFailureCancels: a failed event write calls lost (which
// cancels the request, freeing its slot); a good one does not.
func TestReplyWriteFailureCancels(t *testing.T) {
	for _, tc := range []struct {
		name string
		w    http.ResponseWriter
		lost bool
	}{
		{"write fails", failingWriter{httptest.NewRecorder()}, true},
		{"write succeeds", httptest.NewRecorder(), false},
	} {
		var got error
		a := &reply{w: tc.w, lost: func(err error) { got = err }}
		a.raw([]byte(`{"x":1}`))
		if (got != nil) != tc.lost {
			t.Errorf("%s: lost called with %v, want called %v", tc.name, got, tc.lost)
		}
	}
	rec := httptest.NewRecorder()
	(&reply{w: rec}).raw([]byte("[DONE]"))
	if got := rec.Body.String(); got != "data: [DONE]\n\n" {
		t.Errorf("event written as %q", got)
	}
}
