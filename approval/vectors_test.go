package approval

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/canonical-vectors.json from the inputs in vectors_test.go")

const vectorsFile = "testdata/canonical-vectors.json"

// vectorFile is testdata/canonical-vectors.json: what a backend in any
// language runs to check its canonical JSON against the guard's.
type vectorFile struct {
	Comment  string           `json:"comment"`
	Vectors  []vector         `json:"vectors"`
	Rejected []rejectedVector `json:"rejected"`
}

type vector struct {
	Name      string `json:"name"`
	Rule      string `json:"rule"`
	Input     string `json:"input"`
	Canonical string `json:"canonical"`
	SHA256    string `json:"sha256"`
}

type rejectedVector struct {
	Name  string `json:"name"`
	Rule  string `json:"rule"`
	Input string `json:"input"`
}

// vectorInputs cover every rule of docs/approvals.md; -update computes
// their canonical text and hash.
var vectorInputs = []vector{
	{Name: "empty", Rule: "an empty object", Input: `{}`},
	{Name: "whitespace", Rule: "no whitespace outside strings", Input: " {\n\t\"a\" : [ 1 , 2 ] ,\r\n \"b\" : { } } "},
	{Name: "key order", Rule: "keys sorted by their UTF-8 bytes", Input: `{"b":1,"a":2,"B":3,"aa":4,"a_":5,"":6}`},
	{Name: "nested key order", Rule: "sorted at every depth", Input: `{"z":{"y":{"b":[{"d":1,"c":2}],"a":null}},"x":[{"q":true,"p":false}]}`},
	{Name: "unicode key order", Rule: "U+FF61 sorts before U+1F600 in UTF-8 (JavaScript's UTF-16 sort puts it after)", Input: `{"😀":1,"｡":2,"é":3,"z":4}`},
	{Name: "arrays keep their order", Rule: "array elements in their order", Input: `{"a":[3,1,2,[],{},[null]]}`},
	{Name: "literals", Rule: "true, false, null", Input: `{"t":true,"f":false,"n":null}`},
	{Name: "integers", Rule: "integral values without a fraction or exponent", Input: `{"a":0,"b":1,"c":-3,"d":120,"e":1.0,"f":-2.000,"g":1E2,"h":1.5e3}`},
	{Name: "negative zero", Rule: "-0 is written -0", Input: `{"a":-0,"b":-0.0,"c":0e5}`},
	{Name: "decimals", Rule: "the shortest decimal that reads back as the same double", Input: `{"a":120.50,"b":0.1,"c":-0.25,"d":123456789.123456789,"e":3.14159265358979323846}`},
	{Name: "exponent boundaries small", Rule: "plain from 1e-6 up, exponent below", Input: `{"a":0.000001,"b":0.0000001,"c":1.5e-7,"d":-1e-7,"e":0.00000123}`},
	{Name: "exponent form", Rule: "e, a sign, no leading zeros", Input: `{"a":1e-9,"c":2.5e-300,"d":-1.5E-10}`},
	{Name: "large numbers", Rule: "plain digits up to 2^53 - 1, the largest integer past which doubles skip integers", Input: `{"a":1e15,"b":9007199254740991,"c":-9007199254740991,"d":4503599627370495.5,"e":9.007199254740991e15}`},
	{Name: "extremes", Rule: "the smallest subnormal, underflow to 0", Input: `{"min":5e-324,"tiny":1e-400,"ntiny":-1e-400}`},
	{Name: "string escapes", Rule: `only " \ and control characters are escaped; \b \f \n \r \t by name`, Input: `{"s":"quote \" backslash \\ slash \/ tab \t nl \n cr \r bs \b ff \f"}`},
	{Name: "control characters", Rule: `other controls as \u00XX, lowercase hex; DEL is not escaped`, Input: `{"s":"\u0000\u0001\u001f\u007f"}`},
	{Name: "unicode escapes unescaped", Rule: `\uXXXX escapes of anything else are written as the UTF-8 character`, Input: `{"s":"\u0041\u00e9\u4e2d\ud83d\ude00","\u006b":"\u003c\u003e\u0026"}`},
	{Name: "raw unicode", Rule: "non-ASCII characters are written as UTF-8, never escaped", Input: `{"s":"é 中文 😀 ñ","ß":"Grüße"}`},
	{Name: "line and paragraph separators", Rule: `U+2028 and U+2029 are escaped as \u2028 and \u2029`, Input: "{\"s\":\"a\u2028b\\u2029c\"}"},
	{Name: "html characters", Rule: "< > & are not escaped", Input: `{"s":"<b>&amp;</b>"}`},
	{Name: "empty strings and keys", Rule: "empty strings stay", Input: `{"":""}`},
	{Name: "realistic arguments", Rule: "a tool call", Input: `{"appeal_id":"A-17","amount":120.5,"notify":{"email":"ana@example.com","sms":false},"items":[{"sku":"X-1","qty":2}]}`},
}

// rejectedInputs are arguments the rule refuses: the guard answers
// InvalidArgument, so no approval or hash exists for them.
var rejectedInputs = []rejectedVector{
	{Name: "not an object", Rule: "the arguments are one JSON object", Input: `[1,2]`},
	{Name: "a string", Rule: "the arguments are one JSON object", Input: `"a"`},
	{Name: "null", Rule: "the arguments are one JSON object", Input: `null`},
	{Name: "duplicate key", Rule: "a key at most once per object", Input: `{"a":1,"a":2}`},
	{Name: "nested duplicate key", Rule: "a key at most once per object", Input: `{"a":{"b":1,"b":1}}`},
	{Name: "lone high surrogate", Rule: "no unpaired surrogate escapes", Input: `{"s":"\ud800"}`},
	{Name: "lone low surrogate", Rule: "no unpaired surrogate escapes", Input: `{"s":"\udc00x"}`},
	{Name: "number too large", Rule: "numbers within the double range", Input: `{"a":1e400}`},
	{Name: "2^53", Rule: "magnitudes at most 2^53 - 1: past it two integers can be one double (send them as strings)", Input: `{"a":9007199254740992}`},
	{Name: "2^53 + 1", Rule: "magnitudes at most 2^53 - 1 (send them as strings)", Input: `{"a":9007199254740993}`},
	{Name: "a large integer", Rule: "magnitudes at most 2^53 - 1 (send them as strings)", Input: `{"id":12345678901234567890}`},
	{Name: "a large negative number, nested", Rule: "magnitudes at most 2^53 - 1, at every depth", Input: `{"a":[1,{"b":-1e21}]}`},
	{Name: "the largest double", Rule: "magnitudes at most 2^53 - 1", Input: `{"max":1.7976931348623157e308}`},
	{Name: "trailing data", Rule: "nothing after the object", Input: `{"a":1}{}`},
	{Name: "leading zero", Rule: "JSON numbers (RFC 8259)", Input: `{"a":01}`},
	{Name: "NaN", Rule: "JSON numbers (RFC 8259)", Input: `{"a":NaN}`},
	{Name: "single quotes", Rule: "JSON strings (RFC 8259)", Input: `{'a':1}`},
	{Name: "trailing comma", Rule: "JSON (RFC 8259)", Input: `{"a":1,}`},
}

func buildVectors(t *testing.T) vectorFile {
	t.Helper()
	f := vectorFile{
		Comment: "yesguard canonical JSON of tool arguments (docs/approvals.md). For each vector, parse input as JSON, " +
			"write it canonically: the result must be canonical byte for byte, and its SHA-256 (lowercase hex) must be sha256. " +
			"Every rejected input must be refused. Generated by `go test ./approval -run TestCanonicalVectors -update`.",
		Rejected: rejectedInputs,
	}
	for _, v := range vectorInputs {
		canon, err := CanonicalJSON([]byte(v.Input))
		if err != nil {
			t.Fatalf("vector %q: %v", v.Name, err)
		}
		v.Canonical, v.SHA256 = string(canon), ArgsHash(canon)
		f.Vectors = append(f.Vectors, v)
	}
	return f
}

// TestCanonicalVectors checks the committed vectors against the rule,
// through every way in: the JSON text, and a map decoded from it with
// encoding/json (with and without UseNumber). With -update it rewrites the
// file instead.
func TestCanonicalVectors(t *testing.T) {
	want := buildVectors(t)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(want); err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.MkdirAll(filepath.Dir(vectorsFile), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(vectorsFile, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(vectorsFile)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if !bytes.Equal(data, buf.Bytes()) {
		t.Errorf("%s is not what the rule gives now: if the change is meant, the guard's hashes change too; "+
			"otherwise fix the rule. Regenerate with -update.", vectorsFile)
	}
	var got vectorFile
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Vectors) != len(vectorInputs) || len(got.Rejected) != len(rejectedInputs) {
		t.Fatalf("%d vectors and %d rejected, want %d and %d", len(got.Vectors), len(got.Rejected), len(vectorInputs), len(rejectedInputs))
	}
	for _, v := range got.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			canon, err := CanonicalJSON([]byte(v.Input))
			if err != nil || string(canon) != v.Canonical || ArgsHash(canon) != v.SHA256 {
				t.Fatalf("CanonicalJSON = %s, %v (hash %s); want %s (%s)", canon, err, ArgsHash(canon), v.Canonical, v.SHA256)
			}
			for _, useNumber := range []bool{false, true} {
				dec := json.NewDecoder(strings.NewReader(v.Input))
				if useNumber {
					dec.UseNumber()
				}
				var m map[string]any
				if err := dec.Decode(&m); err != nil {
					t.Fatal(err)
				}
				canon, err := CanonicalMap(m)
				if err != nil || string(canon) != v.Canonical {
					t.Errorf("CanonicalMap (UseNumber %v) = %s, %v; want %s", useNumber, canon, err, v.Canonical)
				}
			}
		})
	}
	for _, r := range got.Rejected {
		if canon, err := CanonicalJSON([]byte(r.Input)); err == nil {
			t.Errorf("rejected %q: CanonicalJSON(%s) = %s, want an error", r.Name, r.Input, canon)
		}
	}
}

// TestCanonicalVectorsInOtherLanguages runs the rule as docs/approvals.md
// tells a JavaScript and a Python backend to write it
// (testdata/crosscheck/) over the committed vectors, so the document and
// the vectors are known to be enough to match the guard. CI has node;
// python3 is run where it is installed.
func TestCanonicalVectorsInOtherLanguages(t *testing.T) {
	for _, tc := range []struct{ bin, script string }{
		{"node", "canonical.mjs"},
		{"python3", "canonical.py"},
	} {
		t.Run(tc.bin, func(t *testing.T) {
			bin, err := exec.LookPath(tc.bin)
			if err != nil {
				t.Skipf("%s is not installed", tc.bin)
			}
			out, err := exec.Command(bin, filepath.Join("testdata", "crosscheck", tc.script), vectorsFile).CombinedOutput()
			if err != nil {
				t.Fatalf("%s %s: %v\n%s", tc.bin, tc.script, err, out)
			}
			if want := fmt.Sprintf("%d passed, 0 failed", len(vectorInputs)); !strings.Contains(string(out), want) {
				t.Fatalf("%s %s said %q, want %q", tc.bin, tc.script, out, want)
			}
		})
	}
}
