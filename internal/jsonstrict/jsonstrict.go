// Package jsonstrict is the one strict JSON decoder of the plugin
// configuration: exactly one value, no unknown object keys, nothing after
// it. The filter's keys, the deny responses and the admission and memory
// objects all decode through it; each caller words its own errors.
package jsonstrict

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
)

// ErrTrailingData is returned when more JSON follows the value.
var ErrTrailingData = errors.New("trailing data after the object")

// Decode decodes exactly one JSON value from data into v, refusing object
// keys that v has no field for (UnknownKey names the key) and trailing data
// (ErrTrailingData). Other errors are encoding/json's.
func Decode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return ErrTrailingData
	}
	return nil
}

// UnknownKey returns the key (quoted, as encoding/json writes it) that
// Decode refused as unknown, and whether err is that error. encoding/json
// has no error type for it, so this is the one place that reads its text.
func UnknownKey(err error) (string, bool) {
	if err == nil {
		return "", false
	}
	return strings.CutPrefix(err.Error(), "json: unknown field ")
}
