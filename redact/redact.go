// Package redact removes caller data from decision records before they are
// written to the decision log, stored, or returned by ListDecisions, so
// that the log, the store and the API hold the same redacted record (OPA
// masks its decision log the same way, at the record).
//
// Three rules, each off until configured:
//
//   - Drop: argument fields named by dotted paths ("card.number") are
//     removed from the record's args (and from Complete's result).
//   - Hash: argument fields named by dotted paths are replaced by a keyed
//     hash, HMAC-SHA256 under a secret key, so that an auditor can tell
//     two records with the same value apart from two with different ones,
//     but nobody without the key can test a guess (a card number or a
//     phone number has too few possible values for a plain hash to hide
//     it). Replicas that share the key write the same hash for the same
//     value.
//   - Digits: every run of at least N digits (default 4; digits joined by
//     up to three spaces, dashes, '.', '/', ',', '_' or parentheses count
//     as one run, so "4242 4242" and "4, 2, 4, 2" are eight and four) in
//     the caller's and agent's words, and in the string values of the
//     arguments and the result, is masked with '#'. JSON numbers (an
//     amount) are kept: drop or hash a numeric field that must not be
//     written.
//
// The value of a dropped or hashed field (of three or more characters) is
// also removed wherever the record quotes speech: the turns, the question
// sentence, the match texts, the message and the detail (a dropped value
// becomes "[redacted]", a hashed one its hash). Spoken forms that differ
// from the value ("four two four two" for 4242) are not found; the digit
// rule is what catches those written as digits.
//
// The record's args_hash is never changed: it is the hash of the
// arguments as given, so duplicates and approvals still match.
//
// Fail closed: a record whose args or result cannot be parsed loses them
// whole (Decision returns an error to count), rather than being written
// unredacted.
package redact

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
)

// DefaultMinDigits is the shortest digit run masked by default.
const DefaultMinDigits = 4

// MinKeyBytes is the shortest hashing key accepted.
const MinKeyBytes = 32

// Dropped replaces a dropped field's value where speech quotes it.
const Dropped = "[redacted]"

// HashPrefix starts every hashed value.
const HashPrefix = "hmac:"

// minScrubRunes is the shortest value removed from speech: shorter ones
// ("no", "2") would erase ordinary words.
const minScrubRunes = 3

// Config chooses the rules. The zero Config redacts nothing.
type Config struct {
	// DropFields are dotted paths of argument fields to remove
	// (--redact-drop). A path runs through nested objects; an array on
	// the way applies the rest of the path to each element.
	DropFields []string
	// HashFields are dotted paths of argument fields to replace by their
	// keyed hash (--redact-hash).
	HashFields []string
	// Key is the HMAC key for HashFields, at least MinKeyBytes
	// (--redact-key-file; LoadKey). Replicas must share it for their
	// hashes to agree; RandomKey gives one for a single process.
	Key []byte
	// MaskDigits masks digit runs in speech (--redact-digits).
	MaskDigits bool
	// MinDigits is the shortest run masked; 0 means DefaultMinDigits.
	MinDigits int
}

// Redactor applies a Config. It is immutable and safe for concurrent use.
type Redactor struct {
	drop, hash [][]string
	key        []byte
	minDigits  int // 0: digits are not masked
}

// New validates cfg, reporting every problem at once with its flag.
func New(cfg Config) (*Redactor, error) {
	r := &Redactor{key: bytes.Clone(cfg.Key)}
	var errs []error
	seen := map[string]string{}
	parse := func(flag string, paths []string) [][]string {
		var out [][]string
		for i, p := range paths {
			segs := strings.Split(p, ".")
			bad := p == ""
			for _, s := range segs {
				bad = bad || s == ""
			}
			if bad {
				errs = append(errs, fmt.Errorf("%s[%d] %q: want a dotted path of field names, e.g. card.number", flag, i, p))
				continue
			}
			if other, dup := seen[p]; dup {
				errs = append(errs, fmt.Errorf("%s[%d] %q: also given to %s", flag, i, p, other))
				continue
			}
			seen[p] = flag
			out = append(out, segs)
		}
		return out
	}
	r.drop = parse("--redact-drop", cfg.DropFields)
	r.hash = parse("--redact-hash", cfg.HashFields)
	if len(cfg.HashFields) > 0 && len(cfg.Key) < MinKeyBytes {
		errs = append(errs, fmt.Errorf("--redact-key-file: hashing fields needs a key of at least %d bytes, got %d", MinKeyBytes, len(cfg.Key)))
	}
	if cfg.MaskDigits {
		r.minDigits = cfg.MinDigits
		if r.minDigits == 0 {
			r.minDigits = DefaultMinDigits
		}
		if r.minDigits < 1 {
			errs = append(errs, fmt.Errorf("--redact-digits: the shortest run masked must be at least 1, got %d", cfg.MinDigits))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return r, nil
}

// Enabled reports whether any rule is on.
func (r *Redactor) Enabled() bool {
	return r != nil && (len(r.drop) > 0 || len(r.hash) > 0 || r.minDigits > 0)
}

// RandomKey is a fresh hashing key, for a guard that was given none: its
// hashes agree within this process only, not across restarts or replicas.
func RandomKey() []byte {
	k := make([]byte, MinKeyBytes)
	_, _ = rand.Read(k) // never fails: crypto/rand crashes the process first
	return k
}

// LoadKey reads a hashing key file: its bytes as they are (a trailing
// newline is kept out), at least MinKeyBytes.
func LoadKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--redact-key-file: %w", err)
	}
	b = bytes.TrimRight(b, "\r\n")
	if len(b) < MinKeyBytes {
		return nil, fmt.Errorf("--redact-key-file %s: want at least %d bytes, got %d (e.g. the output of 'yesguard token')", path, MinKeyBytes, len(b))
	}
	return b, nil
}

// Decision returns a redacted copy of d; d itself is not changed, so the
// caller may still answer the pipeline from it. A nil or disabled
// Redactor returns d. On an error (args or result that are not JSON) the
// copy has lost them whole and is still safe to write.
func (r *Redactor) Decision(d *yesguardv1.Decision) (*yesguardv1.Decision, error) {
	if !r.Enabled() || d == nil {
		return d, nil
	}
	out := proto.Clone(d).(*yesguardv1.Decision)
	s := scrubber{r: r, repl: map[string]string{}}
	var errs []error
	args, err := s.fields(out.Args)
	if err != nil {
		errs = append(errs, fmt.Errorf("args: %w", err))
	}
	result, err := s.fields(out.Result)
	if err != nil {
		errs = append(errs, fmt.Errorf("result: %w", err))
	}
	s.compile()
	out.Args, out.Result = s.document(out.Args, args), s.document(out.Result, result)
	out.Message = s.text(out.Message)
	if ev := out.Evidence; ev != nil {
		s.turn(ev.Question)
		s.turn(ev.Answer)
		for _, t := range ev.RecentTurns {
			s.turn(t)
		}
		ev.QuestionSentence = s.text(ev.QuestionSentence)
		ev.Detail = s.text(ev.Detail)
		for _, m := range ev.Matches {
			m.Text = s.text(m.Text)
			m.Pattern = s.text(m.Pattern)
		}
	}
	return out, errors.Join(errs...)
}

// Turns returns redacted copies of turns (ListDecisions'
// include_transcript): digit runs masked. They carry no arguments, so
// field values are not looked for; Decision does that for each record.
func (r *Redactor) Turns(turns []*yesguardv1.Turn) []*yesguardv1.Turn {
	if !r.Enabled() || r.minDigits == 0 {
		return turns
	}
	s := scrubber{r: r}
	out := make([]*yesguardv1.Turn, len(turns))
	for i, t := range turns {
		out[i] = proto.Clone(t).(*yesguardv1.Turn)
		s.turn(out[i])
	}
	return out
}

// Events returns redacted copies of transcript events (ListDecisions'
// include_events), as Turns does the turns.
func (r *Redactor) Events(evs []*yesguardv1.ReceivedEvent) []*yesguardv1.ReceivedEvent {
	if !r.Enabled() || r.minDigits == 0 {
		return evs
	}
	s := scrubber{r: r}
	out := make([]*yesguardv1.ReceivedEvent, len(evs))
	for i, e := range evs {
		out[i] = proto.Clone(e).(*yesguardv1.ReceivedEvent)
		if ev := out[i].GetEvent(); ev != nil {
			ev.Text = s.text(ev.Text)
		}
	}
	return out
}

// Text redacts one piece of speech: digit runs masked.
func (r *Redactor) Text(s string) string {
	if !r.Enabled() {
		return s
	}
	return (&scrubber{r: r}).text(s)
}

// scrubber redacts one record: the field rules first, which gather the
// values to look for in its speech.
type scrubber struct {
	r *Redactor
	// repl maps each removed value (lower case) to what replaces it; vals
	// are its keys, longest first.
	repl map[string]string
	vals []string
	// re is built only for text whose lower case is not the same length.
	re *regexp.Regexp
}

// fields parses a JSON document (args or result) and applies the drop and
// hash rules to it. It returns nil for an empty document (Decision runs
// only with a rule on, and every rule rewrites documents). A document that
// does not parse is an error, and document drops it whole.
func (s *scrubber) fields(doc string) (*any, error) {
	if doc == "" {
		return nil, nil
	}
	dec := json.NewDecoder(strings.NewReader(doc))
	dec.UseNumber()
	v := new(any)
	if err := dec.Decode(v); err != nil {
		return nil, fmt.Errorf("not JSON, dropped whole: %w", err)
	}
	if dec.More() {
		return nil, errors.New("not one JSON value, dropped whole")
	}
	for _, path := range s.r.drop {
		walk(*v, path, func(obj map[string]any, key string) {
			s.remember(obj[key], Dropped)
			delete(obj, key)
		})
	}
	for _, path := range s.r.hash {
		walk(*v, path, func(obj map[string]any, key string) {
			h := s.r.hashValue(obj[key])
			s.remember(obj[key], h)
			obj[key] = h
		})
	}
	return v, nil
}

// document writes back a document fields parsed, with every remembered
// value removed from the strings left in it too (a note that repeats a
// dropped card number). A document fields did not parse is dropped, or
// kept as it was when there were no field rules.
func (s *scrubber) document(doc string, v *any) string {
	switch {
	case v != nil:
		return encode(s.values(*v))
	case doc == "":
		return doc
	}
	return ""
}

// values removes remembered values from every string in v, and masks its
// digit runs (the digit rule covers argument and result strings too:
// numbers, such as an amount, are kept; drop or hash a numeric field that
// must not be logged).
func (s *scrubber) values(v any) any {
	if len(s.vals) == 0 && s.r.minDigits == 0 {
		return v
	}
	switch t := v.(type) {
	case string:
		return s.text(t)
	case map[string]any:
		for k, e := range t {
			t[k] = s.values(e)
		}
	case []any:
		for i, e := range t {
			t[i] = s.values(e)
		}
	}
	return v
}

// walk calls f on each object holding the last segment of path.
func walk(v any, path []string, f func(obj map[string]any, key string)) {
	switch t := v.(type) {
	case map[string]any:
		child, ok := t[path[0]]
		if !ok {
			return
		}
		if len(path) == 1 {
			f(t, path[0])
			return
		}
		walk(child, path[1:], f)
	case []any:
		for _, e := range t {
			walk(e, path, f)
		}
	}
}

// remember records the scalar values inside v, to be replaced by with
// wherever speech quotes them.
func (s *scrubber) remember(v any, with string) {
	switch t := v.(type) {
	case string:
		if utf8.RuneCountInString(strings.TrimSpace(t)) >= minScrubRunes {
			s.repl[strings.ToLower(strings.TrimSpace(t))] = with
		}
	case json.Number:
		s.remember(string(t), with)
	case map[string]any:
		for _, e := range t {
			s.remember(e, with)
		}
	case []any:
		for _, e := range t {
			s.remember(e, with)
		}
	}
}

// compile orders the remembered values longest first, so that a value
// inside a longer one does not split it.
func (s *scrubber) compile() {
	s.vals = make([]string, 0, len(s.repl))
	for v := range s.repl {
		s.vals = append(s.vals, v)
	}
	sort.Slice(s.vals, func(i, j int) bool {
		if len(s.vals[i]) != len(s.vals[j]) {
			return len(s.vals[i]) > len(s.vals[j])
		}
		return s.vals[i] < s.vals[j]
	})
}

// replace removes remembered values from t, ignoring case: the leftmost
// value at each place, the longest first.
func (s *scrubber) replace(t string) string {
	if len(s.vals) == 0 {
		return t
	}
	lower, ok := lowerInPlace(t)
	if !ok {
		return s.replaceFolded(t)
	}
	var b strings.Builder
	last := 0
	for i := 0; i < len(lower); {
		matched := ""
		for _, v := range s.vals {
			if strings.HasPrefix(lower[i:], v) {
				matched = v
				break
			}
		}
		if matched == "" {
			i++
			continue
		}
		b.WriteString(t[last:i])
		b.WriteString(s.repl[matched])
		i += len(matched)
		last = i
	}
	if last == 0 {
		return t
	}
	b.WriteString(t[last:])
	return b.String()
}

// lowerInPlace lowers t when every rune keeps its byte length, so that an
// index into the result is one into t. ok is false otherwise (a few
// letters, such as the Kelvin sign, change length).
func lowerInPlace(t string) (string, bool) {
	for _, r := range t {
		if l := unicode.ToLower(r); l != r && utf8.RuneLen(l) != utf8.RuneLen(r) {
			return "", false
		}
	}
	return strings.ToLower(t), true
}

// replaceFolded is replace for text lowerInPlace cannot index: one
// case-insensitive pattern of every value, longest first.
func (s *scrubber) replaceFolded(t string) string {
	if s.re == nil {
		quoted := make([]string, len(s.vals))
		for i, v := range s.vals {
			quoted[i] = regexp.QuoteMeta(v)
		}
		s.re = regexp.MustCompile("(?i)" + strings.Join(quoted, "|"))
	}
	return s.re.ReplaceAllStringFunc(t, func(m string) string {
		if with, ok := s.repl[strings.ToLower(m)]; ok {
			return with
		}
		return Dropped // a folding ToLower does not undo: hide it all the same
	})
}

// text removes remembered values from speech, then masks digit runs.
func (s *scrubber) text(t string) string {
	t = s.replace(t)
	if s.r.minDigits > 0 {
		t = maskDigits(t, s.r.minDigits)
	}
	return t
}

func (s *scrubber) turn(t *yesguardv1.Turn) {
	if t != nil {
		t.Text = s.text(t.Text)
	}
}

// hashValue is HMAC-SHA256 of the value's JSON under the key, its first
// 16 bytes written with the letters a-p for the digits of hex: a hash in
// the log must not look like a digit run (card scanners, and the digit
// rule itself, would flag it).
func (r *Redactor) hashValue(v any) string {
	m := hmac.New(sha256.New, r.key)
	m.Write([]byte(encode(v)))
	sum := m.Sum(nil)[:16]
	b := make([]byte, 0, len(HashPrefix)+32)
	b = append(b, HashPrefix...)
	for _, c := range sum {
		b = append(b, 'a'+c>>4, 'a'+c&0xf)
	}
	return string(b)
}

// encode writes v as the guard's canonical JSON does: encoding/json with
// sorted keys, numbers as they were written, no HTML escaping.
func encode(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // a decoded JSON value always encodes
	return strings.TrimSuffix(buf.String(), "\n")
}

// isJoiner reports whether c may join two digit groups into one run: any
// space (tabs, no-break and wide spaces too), any dash (hyphen, en and em
// dash, the minus sign), '.', '/', ',', '_' and parentheses. Speech-to-text
// writes a spoken number as "4, 2, 4, 2" or "42 - 42", people as
// "424–242", "42  42" or "(424) 242": all one run.
func isJoiner(c rune) bool {
	switch c {
	case '.', '/', ',', '_', '(', ')', '\u2212':
		return true
	}
	return unicode.IsSpace(c) || unicode.Is(unicode.Pd, c)
}

// maxJoiners is the longest separator between two digit groups of one
// run: ", " and " - " are one separator, a sentence between two numbers
// is not.
const maxJoiners = 3

// maskDigits replaces with '#' each digit of every run of at least min
// digits, a run being digits with at most maxJoiners joiners between any
// two.
func maskDigits(s string, min int) string {
	rs := []rune(s)
	changed := false
	for i := 0; i < len(rs); {
		if !unicode.IsDigit(rs[i]) {
			i++
			continue
		}
		// Extend the run: digits, or up to maxJoiners joiners followed by
		// a digit.
		end, digits := i, 0
		for end < len(rs) {
			if unicode.IsDigit(rs[end]) {
				digits++
				end++
				continue
			}
			k := 0
			for end+k < len(rs) && k < maxJoiners && isJoiner(rs[end+k]) {
				k++
			}
			if k > 0 && end+k < len(rs) && unicode.IsDigit(rs[end+k]) {
				end += k
				continue
			}
			break
		}
		if digits >= min {
			for j := i; j < end; j++ {
				if unicode.IsDigit(rs[j]) {
					rs[j] = '#'
				}
			}
			changed = true
		}
		i = end
	}
	if !changed {
		return s
	}
	return string(rs)
}
