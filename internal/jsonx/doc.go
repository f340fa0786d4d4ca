// Package jsonx decodes the JSON files people write (model configs, plan
// headers) strictly, and words every failure for a person: the field, the
// JSON type wanted and the one found, never a Go type name.
//
//	var h Header
//	if err := jsonx.Decode(line, &h); err != nil {
//		return fmt.Errorf("%s: plan header: %v", path, err) // e.g. field "format_version": want an integer, got string
//	}
package jsonx
