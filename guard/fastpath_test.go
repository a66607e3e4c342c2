package guard

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"
)

// jsonCanonical is canonicalValue as it was first written: encoding/json
// of AsInterface. canonicalValue must match it byte for byte, since the
// arguments' hash (dedupe keys) and the decision records rest on it.
func jsonCanonical(v *structpb.Value) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v.AsInterface()); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// valueFrom builds a structpb.Value tree from fuzz bytes.
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

func FuzzCanonicalValue(f *testing.F) {
	for _, s := range []string{"", "\x06\x03\x04a\x05abc\x02", "\x07\x04\x08<&>\"\\\x05\x01\x09\x13", "\x04\x06\xe2\x80\xa8\xff\x7f\x00", "\x16\x01k\x33"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, _ := valueFrom(data, 0)
		want, err := jsonCanonical(v)
		if err != nil {
			t.Fatalf("encoding/json: %v", err)
		}
		got, err := canonicalValue(v)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("canonicalValue(%v) = %q, %v\nencoding/json gives %q", v, got, err, want)
		}
		if s := v.GetStructValue(); s != nil {
			got, _ := canonicalArgs(s)
			if !bytes.Equal(got, want) {
				t.Fatalf("canonicalArgs = %q, want %q", got, want)
			}
		}
	})
}

func FuzzValidToolName(f *testing.F) {
	for _, s := range []string{"", "book_appointment", "a.b:c-d", "a b", "é", strings.Repeat("x", 128), strings.Repeat("x", 129), "x\n", "ok$"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if got, want := ValidToolName(name), toolNameRE.MatchString(name); got != want {
			t.Fatalf("validToolName(%q) = %v, the regexp says %v", name, got, want)
		}
	})
}
