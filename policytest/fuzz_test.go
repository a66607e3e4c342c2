package policytest

import (
	"os"
	"testing"
)

// FuzzParse: a test file is outside input; Parse never panics, and what it
// accepts has a named test with at least one step, each with a tool and an
// outcome.
func FuzzParse(f *testing.F) {
	if b, err := os.ReadFile("../policy.example.test.yaml"); err == nil {
		f.Add(b)
	}
	f.Add([]byte("tests:\n  - name: a\n    steps:\n      - tool: t\n        want: allow\n        turns: [{caller: yes, age: 1s}]\n"))
	f.Add([]byte("tests: [{name: x, tool: t, want: refuse, race: true, turns: [{agent: q}, {caller: y}]}]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse(data, "fuzz.yaml")
		if err != nil {
			return
		}
		for _, tc := range file.Tests {
			if tc.Name == "" || len(tc.Steps) == 0 {
				t.Fatalf("accepted a test without a name or a step: %+v", tc)
			}
			for _, s := range tc.Steps {
				if s.Tool == "" || s.Want == 0 {
					t.Fatalf("accepted a step without a tool or an outcome: %+v", s)
				}
			}
		}
	})
}
