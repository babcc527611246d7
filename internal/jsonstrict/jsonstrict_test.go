package jsonstrict

import (
	"errors"
	"testing"
)

func TestDecode(t *testing.T) {
	type obj struct {
		A int `json:"a"`
	}
	var v obj
	if err := Decode([]byte(` {"a": 1} `), &v); err != nil || v.A != 1 {
		t.Fatalf("valid object: %v, %+v", err, v)
	}
	err := Decode([]byte(`{"a": 1, "b": 2}`), &v)
	if key, ok := UnknownKey(err); !ok || key != `"b"` {
		t.Errorf("unknown key: %v (%q, %v), want \"b\"", err, key, ok)
	}
	if err := Decode([]byte(`{"a": 1} {}`), &v); !errors.Is(err, ErrTrailingData) {
		t.Errorf("trailing object: %v, want ErrTrailingData", err)
	}
	if err := Decode([]byte(`{"a": "x"}`), &v); err == nil || errors.Is(err, ErrTrailingData) {
		t.Errorf("type error: %v", err)
	} else if _, ok := UnknownKey(err); ok {
		t.Errorf("a type error read as an unknown key: %v", err)
	}
	if _, ok := UnknownKey(nil); ok {
		t.Error("UnknownKey(nil)")
	}
}
