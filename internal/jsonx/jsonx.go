package jsonx

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// FieldError is a problem with one field of the object (Field is the JSON
// key, dotted for a nested one, or "" for the object itself).
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Msg
	}
	return fmt.Sprintf("field %q: %s", e.Field, e.Msg)
}

// Decode decodes data, which must hold one JSON object, into the struct v
// points to. It refuses what encoding/json lets through:
//
//   - a key that is not exactly the JSON name of a field (encoding/json
//     matches names case-insensitively and drops unknown keys), naming the
//     closest field when one is close;
//   - a key given twice;
//   - null for a field that is not a pointer (encoding/json keeps the old
//     value, so a null silently became the default);
//   - anything after the object.
//
// Nested objects are decoded by encoding/json with unknown fields refused.
// Fields tagged "-" are not part of the file.
func Decode(data []byte, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Struct {
		panic("jsonx.Decode: v must point to a struct")
	}
	fields := jsonFields(rv.Elem().Type())
	raw, keys, err := Object(data)
	if err != nil {
		return err
	}
	for _, k := range keys {
		f, ok := fields[k]
		if !ok {
			return unknownField(k, fields)
		}
		fv := rv.Elem().FieldByIndex(f.Index)
		if IsNull(raw[k]) {
			if fv.Kind() != reflect.Pointer {
				return &FieldError{k, "null, want " + want(f.Type)}
			}
			fv.SetZero()
			continue
		}
		if err := decodeValue(raw[k], fv.Addr().Interface()); err != nil {
			return fieldErr(k, err)
		}
	}
	return nil
}

// Object splits data, one JSON object, into its members; keys lists them in
// file order. A key given twice, a top level that is not an object and
// anything after the object are errors.
func Object(data []byte) (map[string]json.RawMessage, []string, error) {
	m, keys, err := object(data)
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		err = fmt.Errorf("invalid JSON at byte %d: unexpected end of data", len(data))
	}
	return m, keys, err
}

func object(data []byte) (map[string]json.RawMessage, []string, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, nil, eofOr(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, nil, &FieldError{"", fmt.Sprintf("top level is %s, want an object", tokenKind(tok))}
	}
	raw := map[string]json.RawMessage{}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, eofOr(err)
		}
		k := tok.(string) // inside an object the decoder yields only string keys here
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, eofOr(err)
		}
		if _, dup := raw[k]; dup {
			return nil, nil, &FieldError{k, "given twice"}
		}
		raw[k] = v
		keys = append(keys, k)
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, nil, eofOr(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		off := dec.InputOffset()
		if err != nil {
			return nil, nil, Error(err)
		}
		return nil, nil, fmt.Errorf("invalid JSON at byte %d: data after the object", off)
	}
	return raw, keys, nil
}

// eofOr keeps an end-of-data error for Object to place, else words err.
func eofOr(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return Error(err)
}

// IsNull reports whether a raw value is the JSON null.
func IsNull(raw json.RawMessage) bool {
	return string(bytes.TrimSpace(raw)) == "null"
}

// Error rewords an error of encoding/json: a type mismatch names the field
// and the JSON types (`field "dim": want an integer, got string`), a syntax
// error its byte offset. Other errors come back unchanged.
func Error(err error) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		return &FieldError{te.Field, typeMsg(te)}
	case errors.As(err, &se):
		return fmt.Errorf("invalid JSON at byte %d: %s", se.Offset, strings.TrimPrefix(se.Error(), "json: "))
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return errors.New("invalid JSON: unexpected end of data")
	}
	if s := err.Error(); strings.HasPrefix(s, "json: unknown field ") {
		return &FieldError{strings.Trim(strings.TrimPrefix(s, "json: unknown field "), `"`), "unknown field"}
	}
	return err
}

// decodeValue decodes one member with unknown nested fields refused.
func decodeValue(raw json.RawMessage, ptr any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(ptr)
}

// fieldErr places a member's decoding error under its key.
func fieldErr(key string, err error) error {
	err = Error(err)
	var fe *FieldError
	if errors.As(err, &fe) {
		if fe.Field != "" {
			key += "." + fe.Field
		}
		return &FieldError{key, fe.Msg}
	}
	return &FieldError{key, err.Error()}
}

func typeMsg(te *json.UnmarshalTypeError) string {
	got := te.Value
	if n, ok := strings.CutPrefix(got, "number "); ok {
		// A number that does not fit the field: a fraction or exponent for
		// an integer, or out of range.
		got = n
		switch te.Type.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			return fmt.Sprintf("want %s (digits only, within ±%d), got %s", want(te.Type), int64(1)<<(te.Type.Bits()-1)-1, got)
		}
		return fmt.Sprintf("want %s, got %s (out of range)", want(te.Type), got)
	}
	return fmt.Sprintf("want %s, got %s", want(te.Type), jsonKind(got))
}

// jsonKind words the Value of an UnmarshalTypeError ("string", "bool", ...).
func jsonKind(v string) string {
	switch v {
	case "bool":
		return "true/false"
	case "array":
		return "a list"
	case "object":
		return "an object"
	}
	return v
}

func tokenKind(tok json.Token) string {
	switch t := tok.(type) {
	case nil:
		return "null"
	case json.Delim:
		if t == '[' {
			return "a list"
		}
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "true/false"
	}
	return fmt.Sprint(tok)
}

// want words the JSON a Go type takes.
func want(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		if t == reflect.TypeFor[json.RawMessage]() {
			return "a JSON value"
		}
		return "a list of " + plural(t.Elem())
	case reflect.Pointer:
		return want(t.Elem()) + " or null"
	}
	return "an object"
}

func plural(t reflect.Type) string {
	w := want(t)
	for _, art := range []string{"an ", "a "} {
		if s, ok := strings.CutPrefix(w, art); ok {
			switch {
			case strings.HasPrefix(s, "list of "):
				return "lists of " + strings.TrimPrefix(s, "list of ")
			case s == "true or false":
				return "booleans"
			}
			return s + "s"
		}
	}
	return w
}

// jsonFields maps each JSON name of a struct type to its field.
func jsonFields(t reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	for _, f := range reflect.VisibleFields(t) {
		if !f.IsExported() || f.Anonymous {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		out[name] = f
	}
	return out
}

// FieldNames are the keys Decode accepts for the struct type t.
func FieldNames(t reflect.Type) map[string]bool {
	out := map[string]bool{}
	for name := range jsonFields(t) {
		out[name] = true
	}
	return out
}

// unknownField names the closest known field when one is close (a
// misspelling): at most two edits, or the same name in another case.
func unknownField(key string, fields map[string]reflect.StructField) error {
	names := make([]string, 0, len(fields))
	for n := range fields {
		names = append(names, n)
	}
	if near := Closest(key, names); near != "" {
		return &FieldError{key, fmt.Sprintf("unknown field (did you mean %q?)", near)}
	}
	return &FieldError{key, "unknown field"}
}

// Closest returns the name of names nearest to key when it is at most two
// edits away (or differs only in case), else "". Ties go to the first in
// sorted order.
func Closest(key string, names []string) string {
	best, bestD := "", 3
	for _, n := range names {
		d := editDistance(strings.ToLower(key), strings.ToLower(n))
		if d < bestD || (d == bestD && best != "" && n < best) {
			best, bestD = n, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance (keys are short).
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		if a == b {
			return 0
		}
		return 64
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
