package guard

import (
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/yesguard/yesguard/approval"
)

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

// canonicalValue is v as canonical JSON (approval.AppendCanonical: the one
// implementation, which backends verifying approvals match).
func canonicalValue(v *structpb.Value) ([]byte, error) {
	return approval.AppendCanonical(make([]byte, 0, 64), v), nil
}
