package guard

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/structpb"
)

// MaxArgsBytes bounds the canonical JSON of a tool call's arguments.
const MaxArgsBytes = 64 << 10

// CanonicalArgs is the arguments as JSON with sorted keys, so the same
// arguments always hash the same; it fails when they take more than
// MaxArgsBytes.
func CanonicalArgs(s *structpb.Struct) ([]byte, error) {
	return canonicalArgs(s)
}

// ArgsHash is the hex sha256 of canonical arguments: with the call and the
// tool it names an action.
func ArgsHash(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	return hexString(&sum)
}

// hexString is hex.EncodeToString(sum[:]) with one allocation (the
// string) instead of two.
func hexString(sum *[sha256.Size]byte) string {
	var buf [2 * sha256.Size]byte
	hex.Encode(buf[:], sum[:])
	return string(buf[:])
}

// ValidToolName reports whether name is a tool name as a policy may list
// it: 1 to 128 of the ASCII letters, digits and _ . : -. It is
// toolNameRE.MatchString without the regexp machinery, as it runs on every
// Check.
func ValidToolName(name string) bool {
	if len(name) < 1 || len(name) > 128 {
		return false
	}
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9',
			c == '_', c == '.', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
}

// canonicalArgs is the arguments as JSON with sorted keys, so the same
// arguments always hash the same.
func canonicalArgs(s *structpb.Struct) ([]byte, error) {
	if s == nil {
		return []byte("{}"), nil
	}
	b, err := canonicalValue(structpb.NewStructValue(s))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxArgsBytes {
		return nil, fmt.Errorf("at most %d bytes of JSON", MaxArgsBytes)
	}
	return b, nil
}

// canonicalValue is v as JSON, byte for byte as encoding/json writes
// v.AsInterface() without HTML escaping: object keys sorted, numbers as
// ES6 writes them, NaN and the infinities as the strings AsInterface makes
// of them. It is written directly, without the maps and interfaces
// AsInterface builds; FuzzCanonicalValue holds it to encoding/json. It
// never fails.
func canonicalValue(v *structpb.Value) ([]byte, error) {
	return appendCanonical(make([]byte, 0, 128), v), nil
}

func appendCanonical(b []byte, v *structpb.Value) []byte {
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
				b = appendCanonical(b, e)
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
		b = appendCanonical(b, fields[k])
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
