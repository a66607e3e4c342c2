package redact

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"

	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
)

// The field names the generated arguments use; values never hold them.
var propKeys = []string{"card", "number", "holder", "phone", "items", "note"}

// propValue is a string leaf: it starts with "Zq", which no key, no hash
// (letters a-p) and no replacement ("[redacted]") holds, so finding one in
// the output can only mean it leaked.
func propValue() *rapid.Generator[string] {
	return rapid.StringMatching(`Zq[a-zA-Z0-9]{1,10}`)
}

// propArgs is a JSON object up to three levels deep, with arrays of
// objects, strings, numbers and booleans.
func propArgs(depth int) *rapid.Generator[map[string]any] {
	return rapid.Custom(func(t *rapid.T) map[string]any {
		obj := map[string]any{}
		n := rapid.IntRange(0, 4).Draw(t, "fields")
		for i := 0; i < n; i++ {
			key := rapid.SampledFrom(propKeys).Draw(t, "key")
			kind := rapid.IntRange(0, 4).Draw(t, "kind")
			switch {
			case kind == 0 && depth > 0:
				obj[key] = propArgs(depth-1).Draw(t, "object")
			case kind == 1 && depth > 0:
				elems := rapid.SliceOfN(propArgs(depth-1), 1, 3).Draw(t, "array")
				arr := make([]any, len(elems))
				for j, e := range elems {
					arr[j] = e
				}
				obj[key] = arr
			case kind == 2:
				obj[key] = json.Number(rapid.StringMatching(`[1-9][0-9]{0,8}`).Draw(t, "number"))
			case kind == 3:
				obj[key] = rapid.Bool().Draw(t, "bool")
			default:
				obj[key] = propValue().Draw(t, "string")
			}
		}
		return obj
	})
}

// propPath is a dotted path of one to three keys.
func propPath() *rapid.Generator[string] {
	return rapid.Custom(func(t *rapid.T) string {
		return strings.Join(rapid.SliceOfN(rapid.SampledFrom(propKeys), 1, 3).Draw(t, "segments"), ".")
	})
}

// stringsUnder collects the string leaves under path in v: the values the
// field rule removes.
func stringsUnder(v any, path []string, out *[]string) {
	switch t := v.(type) {
	case map[string]any:
		child, ok := t[path[0]]
		if !ok {
			return
		}
		if len(path) == 1 {
			allStrings(child, out)
			return
		}
		stringsUnder(child, path[1:], out)
	case []any:
		for _, e := range t {
			stringsUnder(e, path, out)
		}
	}
}

func allStrings(v any, out *[]string) {
	switch t := v.(type) {
	case string:
		*out = append(*out, t)
	case map[string]any:
		for _, e := range t {
			allStrings(e, out)
		}
	case []any:
		for _, e := range t {
			allStrings(e, out)
		}
	}
}

// propSpeech is a line of speech that may quote any of values (in any
// case), and digit runs with joiners, among words.
func propSpeech(values []string) *rapid.Generator[string] {
	return rapid.Custom(func(t *rapid.T) string {
		var parts []string
		n := rapid.IntRange(0, 8).Draw(t, "words")
		for i := 0; i < n; i++ {
			switch rapid.IntRange(0, 4).Draw(t, "part") {
			case 0:
				if len(values) > 0 {
					v := rapid.SampledFrom(values).Draw(t, "quoted")
					if rapid.Bool().Draw(t, "upper") {
						v = strings.ToUpper(v)
					}
					parts = append(parts, v)
				}
			case 1:
				parts = append(parts, rapid.StringMatching(`[0-9]{1,6}([ ./,-][0-9]{1,5}){0,3}`).Draw(t, "digits"))
			case 2:
				parts = append(parts, rapid.StringMatching(`[０-９٠-٩]{1,6}`).Draw(t, "unicode digits"))
			default:
				parts = append(parts, rapid.SampledFrom([]string{"yes", "card", "ending", "Straße", "go", "ahead", "$", "?", "."}).Draw(t, "word"))
			}
		}
		sep := rapid.SampledFrom([]string{" ", "", ", "}).Draw(t, "sep")
		return strings.Join(parts, sep)
	})
}

// TestRedactionProperty: after redaction, no dropped or hashed field's
// value appears anywhere in the marshalled record, the digit rule leaves
// no run of N or more digits in it, and args_hash is the one given.
//
// The generated records carry their digits and values only where caller
// data goes; their ids, hashes and versions are digit-free, and they have
// no times or counters, so the whole marshalled record can be searched.
// Args and result are left out of the digit search only: the digit rule
// is for speech, and arguments are governed by the field rules.
func TestRedactionProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		args := propArgs(2).Draw(t, "args")
		result := propArgs(1).Draw(t, "result")
		drop := rapid.SliceOfNDistinct(propPath(), 0, 3, func(s string) string { return s }).Draw(t, "drop")
		var hash []string
		for _, p := range rapid.SliceOfNDistinct(propPath(), 0, 3, func(s string) string { return s }).Draw(t, "hash") {
			if !contains(drop, p) {
				hash = append(hash, p)
			}
		}
		minDigits := rapid.IntRange(1, 6).Draw(t, "min digits")
		r, err := New(Config{DropFields: drop, HashFields: hash, Key: testKey, MaskDigits: true, MinDigits: minDigits})
		if err != nil {
			t.Fatal(err)
		}

		var secret, all []string
		allStrings(args, &all)
		allStrings(result, &all)
		for _, p := range append(append([]string(nil), drop...), hash...) {
			stringsUnder(args, strings.Split(p, "."), &secret)
			stringsUnder(result, strings.Split(p, "."), &secret)
		}
		speech := propSpeech(all)
		turn := func(label string) *yesguardv1.Turn {
			return &yesguardv1.Turn{Speaker: "caller", Text: speech.Draw(t, label), Lang: "en"}
		}
		in := &yesguardv1.Decision{
			DecisionId:    "decision-abc",
			CallId:        "call-abc",
			Tool:          "pay_bill",
			ArgsHash:      "args-hash-abcdef",
			PolicyVersion: "builtin",
			Args:          encode(args),
			Result:        encode(result),
			Message:       speech.Draw(t, "message"),
			Outcome:       yesguardv1.Outcome_OUTCOME_REFUSE,
			Evidence: &yesguardv1.Evidence{
				Question:         turn("question"),
				QuestionSentence: speech.Draw(t, "question sentence"),
				Answer:           turn("answer"),
				Matches:          []*yesguardv1.Match{{Rule: "bind", Pattern: speech.Draw(t, "pattern"), Text: speech.Draw(t, "match")}},
				RecentTurns:      []*yesguardv1.Turn{turn("recent 1"), turn("recent 2")},
				Detail:           speech.Draw(t, "detail"),
			},
		}
		out, err := r.Decision(in)
		if err != nil {
			t.Fatal(err)
		}
		if out.GetArgsHash() != in.GetArgsHash() {
			t.Fatal("args_hash changed")
		}
		whole := strings.ToLower(protojson.Format(out))
		for _, v := range secret {
			if strings.Contains(whole, strings.ToLower(v)) {
				t.Fatalf("the value %q of a dropped or hashed field is in the record:\n%s", v, protojson.Format(out))
			}
		}
		speechOnly := proto.Clone(out).(*yesguardv1.Decision)
		speechOnly.Args, speechOnly.Result = "", ""
		if run := longestDigitRun(protojson.Format(speechOnly)); run >= minDigits {
			t.Fatalf("a run of %d digits (min %d) in the record:\n%s", run, minDigits, protojson.Format(speechOnly))
		}
	})
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// longestDigitRun is the longest run of consecutive digits in s, without
// the joiners the rule allows: a simpler and stricter reading than the
// rule's own.
func longestDigitRun(s string) int {
	longest, run := 0, 0
	for _, r := range s {
		if unicode.IsDigit(r) {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	return longest
}

// FuzzRedactText: masking never panics, never grows a digit run, and
// leaves no run of min or more digits.
func FuzzRedactText(f *testing.F) {
	f.Add("card ending 4242", 4)
	f.Add("1-2-3-4", 2)
	f.Add("4, 2, 4, 2 and 42 - 42 and 42\u2013 42 and 4__2", 4)
	f.Add("٤٢٤٢ and ４２", 1)
	f.Fuzz(func(t *testing.T, s string, min int) {
		if min < 1 || min > 64 {
			t.Skip()
		}
		got := maskDigits(s, min)
		if run := longestDigitRun(got); run >= min {
			t.Fatalf("maskDigits(%q, %d) = %q keeps a run of %d", s, min, got, run)
		}
		if run := longestJoinedRun(got); run >= min {
			t.Fatalf("maskDigits(%q, %d) = %q keeps a run of %d digits joined by separators", s, min, got, run)
		}
		if strings.Count(got, "#")-strings.Count(s, "#") > len([]rune(s)) {
			t.Fatal("masking added characters")
		}
	})
}

// longestJoinedRun is the most digits in s joined by separators of up to
// three spaces, dashes, '.', '/', ',', '_' or parentheses (the documented rule, read
// independently of maskDigits: separator characters are counted out as
// they come).
func longestJoinedRun(s string) int {
	sep := func(r rune) bool {
		return unicode.IsSpace(r) || unicode.Is(unicode.Pd, r) || strings.ContainsRune("./,_()\u2212", r)
	}
	longest, run, gap := 0, 0, 0
	for _, r := range s {
		switch {
		case unicode.IsDigit(r):
			run++
			gap = 0
			longest = max(longest, run)
		case sep(r) && run > 0 && gap < 3:
			gap++
		default:
			run, gap = 0, 0
		}
	}
	return longest
}
