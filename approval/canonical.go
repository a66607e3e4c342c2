package approval

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
)

// MaxArgsBytes bounds the canonical JSON of a tool call's arguments. The
// guard refuses larger arguments (InvalidArgument), so no approval is ever
// issued for them.
const MaxArgsBytes = 64 << 10

// MaxExactInteger is the largest magnitude an argument number may have:
// 2^53 − 1 (JavaScript's Number.MAX_SAFE_INTEGER). Every integer up to it
// is a distinct double; past it a double holds only some integers, so two
// different integers sent as numbers (2^53 and 2^53 + 1) would arrive, and
// hash, as one.
const MaxExactInteger = 1<<53 - 1

// CanonicalArgs is the arguments as canonical JSON: what the guard hashes
// (ArgsHash), records and binds into an approval. Nil arguments are "{}".
// It fails when a number is NaN or an infinity (not JSON: no backend can
// hold them), or has a magnitude past MaxExactInteger (it may stand for
// several integers: send it as a string), and when the result is over
// MaxArgsBytes. Two different arguments therefore never share a hash.
func CanonicalArgs(s *structpb.Struct) ([]byte, error) {
	if s == nil {
		return []byte("{}"), nil
	}
	v := structpb.NewStructValue(s)
	if err := checkNumbers(v, ""); err != nil {
		return nil, err
	}
	return canonicalBounded(v)
}

// CanonicalResult is CanonicalArgs for a tool's result, which is replayed
// to duplicates and recorded but never hashed into an approval: any
// number is kept, NaN and the infinities as AppendCanonical writes them.
// It fails only when the result is over MaxArgsBytes.
func CanonicalResult(s *structpb.Struct) ([]byte, error) {
	if s == nil {
		return []byte("{}"), nil
	}
	return canonicalBounded(structpb.NewStructValue(s))
}

func canonicalBounded(v *structpb.Value) ([]byte, error) {
	b := AppendCanonical(make([]byte, 0, 128), v)
	if len(b) > MaxArgsBytes {
		return nil, fmt.Errorf("at most %d bytes of JSON", MaxArgsBytes)
	}
	return b, nil
}

// checkNumbers refuses the numbers under v that have no one meaning:
// NaN, the infinities, and magnitudes past MaxExactInteger. path names v
// in the error ("" for the arguments themselves).
func checkNumbers(v *structpb.Value, path string) error {
	switch k := v.GetKind().(type) {
	case *structpb.Value_NumberValue:
		if k == nil {
			return nil // a kind set to nothing: AppendCanonical writes it as null
		}
		f := k.NumberValue
		switch {
		case math.IsNaN(f) || math.IsInf(f, 0):
			return fmt.Errorf("%s: %v is not a JSON number: send it as a string if the tool takes it", pathName(path), f)
		case math.Abs(f) > MaxExactInteger:
			return fmt.Errorf("%s: %s is beyond ±(2^53 − 1), where a JSON number (a double) no longer holds every integer exactly, so it could stand for another one: send it as a string, with its exact digits",
				pathName(path), appendNumber(nil, f))
		}
	case *structpb.Value_StructValue:
		if k == nil {
			return nil
		}
		for key, e := range k.StructValue.GetFields() {
			if err := checkNumbers(e, path+"."+key); err != nil {
				return err
			}
		}
	case *structpb.Value_ListValue:
		if k == nil {
			return nil
		}
		for i, e := range k.ListValue.GetValues() {
			if err := checkNumbers(e, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

func pathName(path string) string {
	if path == "" {
		return "the arguments"
	}
	return strings.TrimPrefix(path, ".")
}

// CanonicalMap is CanonicalArgs for arguments a Go backend decoded from
// JSON (encoding/json into map[string]any, with or without UseNumber), or
// built from Go values: the types structpb.NewStruct takes (nil, bool,
// strings, numbers of any Go type taken as their float64 value,
// json.Number, []byte as base64, []any and map[string]any). A value of
// another type, a string that is not UTF-8 or a json.Number that is not a
// float64 is an error, never a guess.
func CanonicalMap(m map[string]any) ([]byte, error) {
	s, err := structpb.NewStruct(m)
	if err != nil {
		return nil, err
	}
	return CanonicalArgs(s)
}

// CanonicalJSON is CanonicalArgs for arguments as JSON text, parsed as the
// guard's own JSON clients' arguments are (protojson into a Struct). It
// rejects what that parser rejects: anything but one object, a key twice
// in an object, a string that is not UTF-8 or holds a lone surrogate
// escape, a number outside float64's range, and trailing data; and what
// CanonicalArgs refuses: a number past MaxExactInteger.
func CanonicalJSON(text []byte) ([]byte, error) {
	var s structpb.Struct
	if err := protojson.Unmarshal(text, &s); err != nil {
		return nil, fmt.Errorf("arguments are not one JSON object this rule accepts: %w", err)
	}
	return CanonicalArgs(&s)
}

// ArgsHash is the hash bound into approvals and written in every decision
// record: the SHA-256 of the canonical JSON, in lowercase hex.
func ArgsHash(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:])
}

// AppendCanonical appends v as canonical JSON: byte for byte what
// encoding/json writes for v.AsInterface() without HTML escaping. Object
// keys are sorted by their UTF-8 bytes, numbers are written in the
// shortest form that reads back as the same float64 (ES6 style: exponent
// form below 1e-6 and from 1e21 up), NaN and the infinities (which only a
// protobuf binary client can send) as the strings AsInterface makes of
// them, and strings with only '"', '\\', control characters, U+2028 and
// U+2029 escaped, and invalid UTF-8 as U+FFFD. A nil or unset value is
// null. It is written directly, without the maps and interfaces
// AsInterface builds; FuzzCanonicalValue holds it to encoding/json. It
// never fails.
func AppendCanonical(b []byte, v *structpb.Value) []byte {
	switch k := v.GetKind().(type) {
	case *structpb.Value_NumberValue:
		if k != nil {
			return appendNumber(b, k.NumberValue)
		}
	case *structpb.Value_StringValue:
		if k != nil {
			return appendJSONString(b, k.StringValue)
		}
	case *structpb.Value_BoolValue:
		if k != nil {
			return strconv.AppendBool(b, k.BoolValue)
		}
	case *structpb.Value_StructValue:
		if k != nil {
			return appendStruct(b, k.StructValue)
		}
	case *structpb.Value_ListValue:
		if k != nil {
			b = append(b, '[')
			for i, e := range k.ListValue.GetValues() {
				if i > 0 {
					b = append(b, ',')
				}
				b = AppendCanonical(b, e)
			}
			return append(b, ']')
		}
	}
	return append(b, "null"...)
}

func appendStruct(b []byte, s *structpb.Struct) []byte {
	fields := s.GetFields()
	var small [8]string
	keys := small[:0]
	for k := range fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, k)
		b = append(b, ':')
		b = AppendCanonical(b, fields[k])
	}
	return append(b, '}')
}

// appendNumber writes f as encoding/json writes a float64, and NaN and the
// infinities as structpb's AsInterface turns them into strings.
func appendNumber(b []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(b, `"Infinity"`...)
	case math.IsInf(f, -1):
		return append(b, `"-Infinity"`...)
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-09 is written e-9.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// appendJSONString writes s as encoding/json does without HTML escaping:
// quotes, backslashes and control characters escaped, invalid UTF-8 as
// U+FFFD, U+2028 and U+2029 escaped.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
