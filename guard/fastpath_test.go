package guard

import (
	"strings"
	"testing"
)

// The arguments' canonical JSON is approval's (approval.FuzzCanonicalValue
// holds it to encoding/json); the guard only checks tool names itself.

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
