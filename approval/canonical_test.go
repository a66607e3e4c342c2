package approval

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"
)

// jsonCanonical is the canonical form as it was first defined: encoding/json
// of AsInterface, without HTML escaping. AppendCanonical must match it byte
// for byte, since the arguments' hash (dedupe keys, decision records,
// approvals) rests on it.
func jsonCanonical(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// valueFrom builds a structpb.Value tree from fuzz bytes, odd values
// (nil fields, unset kinds, NaN) included.
func valueFrom(data []byte, depth int) (*structpb.Value, []byte) {
	if len(data) == 0 {
		return structpb.NewNullValue(), nil
	}
	op, data := data[0], data[1:]
	str := func() string {
		n := 0
		if len(data) > 0 {
			n, data = int(data[0]%24), data[1:]
		}
		n = min(n, len(data))
		s := string(data[:n])
		data = data[n:]
		return s
	}
	switch op % 10 {
	case 0:
		return structpb.NewNullValue(), data
	case 1:
		return structpb.NewBoolValue(op&0x10 != 0), data
	case 2:
		var bits uint64
		for i := 0; i < 8 && len(data) > 0; i++ {
			bits, data = bits<<8|uint64(data[0]), data[1:]
		}
		return structpb.NewNumberValue(math.Float64frombits(bits)), data
	case 3:
		specials := []float64{0, math.Copysign(0, -1), 1e-7, 1e-6, 1e21, 1e20, 120.5, -3, math.NaN(), math.Inf(1), math.Inf(-1), 5e-324, math.MaxFloat64, 0.1}
		return structpb.NewNumberValue(specials[int(op>>4)%len(specials)]), data
	case 4, 5:
		return structpb.NewStringValue(str()), data
	case 6, 7:
		if depth > 4 {
			return structpb.NewStringValue("deep"), data
		}
		s := &structpb.Struct{Fields: map[string]*structpb.Value{}}
		for n := int(op>>4) % 5; n > 0; n-- {
			k := str()
			var v *structpb.Value
			v, data = valueFrom(data, depth+1)
			s.Fields[k] = v
		}
		if op&0x80 != 0 {
			s.Fields["nilval"] = nil
		}
		return structpb.NewStructValue(s), data
	case 8:
		if depth > 4 {
			return structpb.NewBoolValue(true), data
		}
		l := &structpb.ListValue{}
		for n := int(op>>4) % 5; n > 0; n-- {
			var v *structpb.Value
			v, data = valueFrom(data, depth+1)
			l.Values = append(l.Values, v)
		}
		return structpb.NewListValue(l), data
	default:
		odd := []*structpb.Value{
			{},
			{Kind: (*structpb.Value_NumberValue)(nil)},
			{Kind: &structpb.Value_StructValue{}},
			{Kind: &structpb.Value_ListValue{}},
			{Kind: (*structpb.Value_StringValue)(nil)},
		}
		return odd[int(op>>4)%len(odd)], data
	}
}

// FuzzCanonicalValue holds AppendCanonical and CanonicalArgs to
// encoding/json, on any tree a protobuf client can send.
func FuzzCanonicalValue(f *testing.F) {
	for _, s := range []string{"", "\x06\x03\x04a\x05abc\x02", "\x07\x04\x08<&>\"\\\x05\x01\x09\x13", "\x04\x06\xe2\x80\xa8\xff\x7f\x00", "\x16\x01k\x33"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, _ := valueFrom(data, 0)
		want, err := jsonCanonical(v.AsInterface())
		if err != nil {
			t.Fatalf("encoding/json: %v", err)
		}
		got := AppendCanonical(nil, v)
		if !bytes.Equal(got, want) {
			t.Fatalf("AppendCanonical(%v) = %q\nencoding/json gives %q", v, got, want)
		}
		if s := v.GetStructValue(); s != nil {
			got, err := CanonicalArgs(s)
			// A number with no one meaning (NaN, an infinity, past
			// 2^53 - 1) refuses the arguments; any other tree within the
			// bound is encoding/json's canonical form.
			if refused := checkNumbers(v, ""); refused != nil {
				if err == nil {
					t.Fatalf("CanonicalArgs = %q, want it refused: %v", got, refused)
				}
			} else if len(want) <= MaxArgsBytes && (err != nil || !bytes.Equal(got, want)) {
				t.Fatalf("CanonicalArgs = %q, %v; want %q", got, err, want)
			}
		}
	})
}

// FuzzCanonicalJSON holds the three ways in to one canonical form: JSON
// text (CanonicalJSON), a map a Go backend decoded from the same text
// (CanonicalMap) and encoding/json's own encoding of that map. Text the
// rule rejects must never crash it.
func FuzzCanonicalJSON(f *testing.F) {
	for _, v := range vectorInputs {
		f.Add(v.Input)
	}
	for _, v := range rejectedInputs {
		f.Add(v.Input)
	}
	f.Fuzz(func(t *testing.T, text string) {
		got, err := CanonicalJSON([]byte(text))
		if err != nil {
			return
		}
		if !json.Valid([]byte(text)) {
			t.Fatalf("CanonicalJSON accepted invalid JSON %q", text)
		}
		for _, useNumber := range []bool{false, true} {
			dec := json.NewDecoder(strings.NewReader(text))
			if useNumber {
				dec.UseNumber()
			}
			var m map[string]any
			if err := dec.Decode(&m); err != nil {
				t.Fatalf("CanonicalJSON accepted %q, encoding/json refuses it: %v", text, err)
			}
			fromMap, err := CanonicalMap(m)
			if err != nil || !bytes.Equal(fromMap, got) {
				t.Fatalf("%q (UseNumber %v): CanonicalMap = %q, %v; CanonicalJSON = %q", text, useNumber, fromMap, err, got)
			}
			if !useNumber {
				want, err := jsonCanonical(m)
				if err != nil || !bytes.Equal(want, got) {
					t.Fatalf("%q: encoding/json = %q, %v; CanonicalJSON = %q", text, want, err, got)
				}
			}
		}
		// The canonical form is a fixed point.
		again, err := CanonicalJSON(got)
		if err != nil || !bytes.Equal(again, got) {
			t.Fatalf("CanonicalJSON(%q) = %q, %v: not a fixed point", got, again, err)
		}
	})
}

func TestCanonicalMapTypes(t *testing.T) {
	canon, err := CanonicalMap(map[string]any{
		"i": 3, "i64": int64(-7), "u8": uint8(200), "f32": float32(0.5),
		"num": json.Number("1.50"), "bytes": []byte("hi"), "nil": nil,
		"list": []any{true, "x", map[string]any{}},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"bytes":"aGk=","f32":0.5,"i":3,"i64":-7,"list":[true,"x",{}],"nil":null,"num":1.5,"u8":200}`
	if string(canon) != want {
		t.Errorf("CanonicalMap = %s\nwant %s", canon, want)
	}
	for name, bad := range map[string]map[string]any{
		"a func":             {"f": func() {}},
		"a struct":           {"s": struct{ A int }{1}},
		"a typed slice":      {"s": []string{"a"}},
		"not UTF-8":          {"s": "\xff"},
		"a key not UTF-8":    {"\xff": 1},
		"a bad json.Number":  {"n": json.Number("1e400")},
		"an empty json.Num.": {"n": json.Number("")},
	} {
		if got, err := CanonicalMap(bad); err == nil {
			t.Errorf("%s: CanonicalMap = %s, want an error", name, got)
		}
	}
	if got, err := CanonicalMap(nil); err != nil || string(got) != "{}" {
		t.Errorf("CanonicalMap(nil) = %s, %v", got, err)
	}
	if got, err := CanonicalArgs(nil); err != nil || string(got) != "{}" {
		t.Errorf("CanonicalArgs(nil) = %s, %v", got, err)
	}
}

func TestCanonicalArgsLimit(t *testing.T) {
	// {"s":"xxx..."} is 8 bytes of frame around the string.
	fits := map[string]any{"s": strings.Repeat("x", MaxArgsBytes-8)}
	if got, err := CanonicalMap(fits); err != nil || len(got) != MaxArgsBytes {
		t.Fatalf("exactly %d bytes: %d, %v", MaxArgsBytes, len(got), err)
	}
	over := map[string]any{"s": strings.Repeat("x", MaxArgsBytes-7)}
	if _, err := CanonicalMap(over); err == nil {
		t.Fatal("one byte over the limit was accepted")
	}
}
