package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// apiError is a refusal with its HTTP status and OpenAI error body
// {"error":{"message","type","param","code"}}.
type apiError struct {
	Status  int     `json:"-"`
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func (e *apiError) Error() string { return e.Message }

// The error types of the bodies.
const (
	typeInvalid     = "invalid_request_error"
	typeServer      = "server_error"
	typeOverloaded  = "overloaded_error"
	typeUnavailable = "service_unavailable"
	typeTimeout     = "timeout_error"
)

func strp(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// invalid is a 400 about param.
func invalid(param, code, format string, args ...any) *apiError {
	return &apiError{Status: http.StatusBadRequest, Message: fmt.Sprintf(format, args...), Type: typeInvalid, Param: strp(param), Code: strp(code)}
}

// writeError answers e as JSON.
func writeError(w http.ResponseWriter, e *apiError) {
	w.Header().Set("Content-Type", "application/json")
	if e.Status == http.StatusTooManyRequests || e.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	w.WriteHeader(e.Status)
	json.NewEncoder(w).Encode(map[string]*apiError{"error": e})
}

// decodeError turns a JSON decoding error of a request body into a 400 (or
// 413 for a body over the limit) naming the field.
func decodeError(err error) *apiError {
	var mbe *http.MaxBytesError
	var ute *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &mbe):
		return &apiError{Status: http.StatusRequestEntityTooLarge, Message: fmt.Sprintf("request body over %d bytes", mbe.Limit), Type: typeInvalid}
	case errors.As(err, &ute):
		field := ute.Field
		if field == "" {
			return invalid("", "", "the request body must be a JSON object")
		}
		return invalid(field, "", "%s: expected %s, got a JSON %s", field, ute.Type, ute.Value)
	case errors.As(err, &se):
		return invalid("", "", "the request body is not valid JSON: %v (at byte %d)", err, se.Offset)
	}
	msg := err.Error()
	// A field's own UnmarshalJSON error: encoding/json does not say which
	// field; the messages of this package name it.
	param := ""
	for _, f := range []string{"stop", "prompt", "content"} {
		if strings.Contains(msg, f) {
			param = f
			break
		}
	}
	if param == "content" {
		param = "messages"
	}
	return invalid(param, "", "the request body is not valid: %s", strings.TrimPrefix(msg, "json: "))
}
