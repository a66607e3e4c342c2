package guard

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"

	"go.yaml.in/yaml/v3"

	"github.com/yesguard/yesguard/approval"
)

// Policy says which tools need a confirmation and how to recognise a
// question about each. It is read from YAML (see policy.example.yaml).
type Policy struct {
	// Defaults apply to every tool.
	Defaults Defaults `yaml:"defaults"`
	// Tools by the name the model calls them. A tool not listed still needs
	// confirmation, with its verb and objects taken from its name.
	Tools map[string]*Tool `yaml:"tools"`

	// version identifies the policy's bytes; set by ParsePolicy.
	version string
}

// Defaults are the policy-wide settings.
type Defaults struct {
	// Wait is how long a Check waits for the caller's current turn, for
	// tools that set no wait of their own. Fit it to the recogniser: the
	// time from end of speech to its final transcript differs several-fold
	// between providers (README, "Waits").
	Wait Duration `yaml:"wait"`
	// MaxWait caps every wait: the defaults' and the tools' `wait`, and
	// a Check's own `wait_ms`.
	MaxWait Duration `yaml:"max_wait"`
	// DuplicateWindow: the same action (call, tool, arguments) allowed
	// again within it is a DUPLICATE.
	DuplicateWindow Duration `yaml:"duplicate_window"`
	// QuantityWindow: the same item recorded again within it is IGNORED
	// unless the caller states a quantity.
	QuantityWindow Duration `yaml:"quantity_window"`
	// MaxAnswerAge: a yes older than this is STALE.
	MaxAnswerAge Duration `yaml:"max_answer_age"`
	// DefaultLang is the language of turns whose events carry none and
	// whose call never named one.
	DefaultLang string `yaml:"default_lang"`
	// ApprovalTTL is how long an ALLOW's signed approval stays valid for
	// the system of record to redeem, for tools that set none of their
	// own. At most approval.DefaultMaxTTL.
	ApprovalTTL Duration `yaml:"approval_ttl"`
	// AskTTL is how long the guard's own question, once issued, is
	// recognised as the question a yes answers.
	AskTTL Duration `yaml:"ask_ttl"`
}

// Tool is one tool's entry.
type Tool struct {
	// Confirm: the tool needs the caller's plain yes (default true).
	Confirm *bool `yaml:"confirm"`
	// Verbs per language: what the tool does ("submit", "send in").
	Verbs map[string][]string `yaml:"verbs"`
	// Objects per language: what it acts on ("appeal", "submission").
	Objects map[string][]string `yaml:"objects"`
	// Bind names arguments whose values the confirming question must state.
	Bind []string `yaml:"bind"`
	// Wait, when set, replaces defaults.wait for this tool.
	Wait *Duration `yaml:"wait"`
	// ApprovalTTL, when set, replaces defaults.approval_ttl for this tool:
	// a payment's backend that answers within seconds can take a shorter
	// one than a claim reviewed by a slower system.
	ApprovalTTL *Duration `yaml:"approval_ttl"`
	// Record marks a tool that records items (an order line).
	Record *Record `yaml:"record"`
	// Ask holds the guard's own question per language, with arguments as
	// {name} placeholders ("Shall I pay your bill of {amount} now?").
	// Without one, the question is built from the locale's frame and the
	// tool's first verb and object in that language.
	Ask map[string]string `yaml:"ask"`
	// Args says how arguments are said in the guard's question.
	Args map[string]*ArgFormat `yaml:"args"`
}

// ArgFormat is how one argument is said: format is currency, date, time,
// number or string (ask.Formats); a currency amount names its currency,
// or the argument holding it.
type ArgFormat struct {
	Format      string `yaml:"format"`
	Currency    string `yaml:"currency"`
	CurrencyArg string `yaml:"currency_arg"`
}

// Record names the arguments of a record tool.
type Record struct {
	// Item: the arguments that name the item (e.g. [sku]).
	Item []string `yaml:"item"`
	// Quantity: the argument holding an explicit quantity (e.g. qty).
	Quantity string `yaml:"quantity"`
}

// NeedsConfirm reports whether the tool needs a confirmation.
func (t *Tool) NeedsConfirm() bool { return t.Confirm == nil || *t.Confirm }

// Duration is a time.Duration written as "900ms" or "15s" in YAML.
type Duration time.Duration

// UnmarshalYAML parses a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return fmt.Errorf("line %d: want a duration such as 900ms or 15s", n.Line)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes the duration as a string.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// D returns the duration as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// Default settings.
const (
	DefaultWait            = 900 * time.Millisecond
	DefaultMaxWait         = 3 * time.Second
	DefaultDuplicateWindow = 15 * time.Second
	DefaultQuantityWindow  = 8 * time.Second
	DefaultMaxAnswerAge    = 30 * time.Second
	DefaultLang            = "en"
	DefaultApprovalTTL     = approval.DefaultTTL
	DefaultAskTTL          = 2 * time.Minute
	// MaxAskTTL bounds ask_ttl: a question is answered in seconds.
	MaxAskTTL = 15 * time.Minute
	// MaxApprovalTTL bounds every approval_ttl: the guard's keys sign no
	// longer-lived token, and a retired key is kept this long.
	MaxApprovalTTL = approval.DefaultMaxTTL
)

// SetDefaults fills every unset field.
func (p *Policy) SetDefaults() {
	d := &p.Defaults
	if d.Wait == 0 {
		d.Wait = Duration(DefaultWait)
	}
	if d.MaxWait == 0 {
		d.MaxWait = Duration(max(DefaultMaxWait, d.Wait.D()))
	}
	if d.DuplicateWindow == 0 {
		d.DuplicateWindow = Duration(DefaultDuplicateWindow)
	}
	if d.QuantityWindow == 0 {
		d.QuantityWindow = Duration(DefaultQuantityWindow)
	}
	if d.MaxAnswerAge == 0 {
		d.MaxAnswerAge = Duration(DefaultMaxAnswerAge)
	}
	if d.DefaultLang == "" {
		d.DefaultLang = DefaultLang
	}
	if d.ApprovalTTL == 0 {
		d.ApprovalTTL = Duration(DefaultApprovalTTL)
	}
	if d.AskTTL == 0 {
		d.AskTTL = Duration(DefaultAskTTL)
	}
	if p.Tools == nil {
		p.Tools = map[string]*Tool{}
	}
}

var (
	toolNameRE = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,128}$`)
	langRE     = regexp.MustCompile(`^[a-z]{2,3}(-[A-Za-z0-9]{2,8})*$`)
)

// Validate reports every problem at once, each naming its field.
func (p *Policy) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	d := p.Defaults
	for _, f := range []struct {
		name string
		v    Duration
		max  time.Duration
	}{
		{"defaults.wait", d.Wait, time.Minute},
		{"defaults.max_wait", d.MaxWait, time.Minute},
		{"defaults.duplicate_window", d.DuplicateWindow, 24 * time.Hour},
		{"defaults.quantity_window", d.QuantityWindow, 24 * time.Hour},
		{"defaults.max_answer_age", d.MaxAnswerAge, 24 * time.Hour},
		{"defaults.approval_ttl", d.ApprovalTTL, MaxApprovalTTL},
		{"defaults.ask_ttl", d.AskTTL, MaxAskTTL},
	} {
		if f.v <= 0 || f.v.D() > f.max {
			bad(f.name, "must be above 0 and at most %s, got %s", f.max, f.v.D())
		}
	}
	if d.Wait > d.MaxWait {
		bad("defaults.wait", "%s is above defaults.max_wait (%s)", d.Wait.D(), d.MaxWait.D())
	}
	if !langRE.MatchString(d.DefaultLang) {
		bad("defaults.default_lang", "%q is not a BCP-47 language tag such as en or es-MX", d.DefaultLang)
	}
	for _, name := range slices.Sorted(maps.Keys(p.Tools)) {
		t := p.Tools[name]
		field := "tools." + name
		if !toolNameRE.MatchString(name) {
			bad(field, "tool names are 1-128 characters of letters, digits and _ . : -")
		}
		if t == nil {
			bad(field, "empty entry; write {} for a tool with default settings")
			continue
		}
		for kind, m := range map[string]map[string][]string{"verbs": t.Verbs, "objects": t.Objects} {
			for _, lang := range slices.Sorted(maps.Keys(m)) {
				if !langRE.MatchString(lang) {
					bad(field+"."+kind+"."+lang, "not a language tag")
				}
				for i, w := range m[lang] {
					if strings.TrimSpace(w) == "" {
						bad(fmt.Sprintf("%s.%s.%s[%d]", field, kind, lang, i), "empty word")
					}
				}
			}
		}
		if t.Wait != nil && (*t.Wait <= 0 || *t.Wait > d.MaxWait) {
			bad(field+".wait", "must be above 0 and at most defaults.max_wait (%s), got %s", d.MaxWait.D(), t.Wait.D())
		}
		if t.ApprovalTTL != nil && (*t.ApprovalTTL <= 0 || t.ApprovalTTL.D() > MaxApprovalTTL) {
			bad(field+".approval_ttl", "must be above 0 and at most %s (the longest approval the guard signs), got %s", MaxApprovalTTL, t.ApprovalTTL.D())
		}
		for i, b := range t.Bind {
			if strings.TrimSpace(b) == "" {
				bad(fmt.Sprintf("%s.bind[%d]", field, i), "empty argument name")
			}
		}
		errs = append(errs, validateAsk(field, t)...)
		if r := t.Record; r != nil {
			if len(r.Item) == 0 {
				bad(field+".record.item", "a record tool names at least one item argument")
			}
			for i, it := range r.Item {
				if strings.TrimSpace(it) == "" {
					bad(fmt.Sprintf("%s.record.item[%d]", field, i), "empty argument name")
				}
			}
		}
	}
	return errors.Join(errs...)
}

// WaitFor is how long a Check of tool waits for the caller's turn: the
// request's own wait when it asks for one (capped at max_wait), else the
// tool's, else the defaults'.
func (p *Policy) WaitFor(tool string, requested time.Duration) time.Duration {
	d := p.Defaults
	if requested > 0 {
		return min(requested, d.MaxWait.D())
	}
	if t := p.Tools[tool]; t != nil && t.Wait != nil {
		return t.Wait.D()
	}
	return d.Wait.D()
}

// ApprovalTTLFor is how long an ALLOW of tool's approval stays valid: the
// tool's approval_ttl, else the defaults'.
func (p *Policy) ApprovalTTLFor(tool string) time.Duration {
	if t := p.Tools[tool]; t != nil && t.ApprovalTTL != nil {
		return t.ApprovalTTL.D()
	}
	return p.Defaults.ApprovalTTL.D()
}

// Version identifies the policy's bytes (empty for a policy built in code).
func (p *Policy) Version() string { return p.version }

// ParsePolicy reads a policy from YAML, rejecting unknown fields, then sets
// defaults and validates it.
func ParsePolicy(r io.Reader) (*Policy, error) {
	raw, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read policy: %w", err)
	}
	p := &Policy{}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(p); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("parse policy: %w", err)
	}
	p.SetDefaults()
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("invalid policy: %w", err)
	}
	sum := sha256.Sum256(raw)
	p.version = "sha256:" + hex.EncodeToString(sum[:6])
	return p, nil
}

// LoadPolicy reads the policy file at path. An empty path gives the default
// policy: every tool needs a confirmation, judged from its name.
func LoadPolicy(path string) (*Policy, error) {
	if path == "" {
		return ParsePolicy(strings.NewReader(""))
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load policy: %w", err)
	}
	defer f.Close()
	p, err := ParsePolicy(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// nameWords splits a tool name into lower-case words: "refund_order",
// "refundOrder" and "refund-order" all give [refund order].
func nameWords(name string) []string {
	var words []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			words = append(words, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	rs := []rune(name)
	for i, r := range rs {
		switch {
		case !unicode.IsLetter(r) && !unicode.IsDigit(r):
			flush()
		case unicode.IsUpper(r) && i > 0 && unicode.IsLower(rs[i-1]):
			flush()
			cur = append(cur, r)
		default:
			cur = append(cur, r)
		}
	}
	flush()
	return words
}

// SharedObjects describes each object that two tools needing confirmation
// both list in one language. Such an object tells neither tool apart: a
// question that only governs it ("proceed with the appointment") is refused
// for both unless the agent's turn names the verb. It is allowed, but
// usually a mistake; the server logs each at start-up and reload.
func (p *Policy) SharedObjects() []string {
	var out []string
	for _, s := range p.shared(func(t *Tool) map[string][]string { return t.Objects }) {
		out = append(out, fmt.Sprintf("tools %s share the object %q (%s): a question that only governs it, such as \"proceed with the %s\", is refused for each unless the agent's turn names the verb; list it under the tool it means",
			strings.Join(s.tools, ", "), s.word, s.lang, s.word))
	}
	return out
}

// SharedVerbs describes each verb that two tools needing confirmation both
// list in one language ("cancel" for cancel_appointment and
// cancel_subscription). A question that names such a verb is about this
// tool only when it (or the sentence it points back to) also names this
// tool's object: "Shall I cancel it?" is refused for both. It is allowed;
// the server logs each at start-up and reload.
func (p *Policy) SharedVerbs() []string {
	var out []string
	for _, s := range p.shared(func(t *Tool) map[string][]string { return t.Verbs }) {
		object := "<object>"
		if objs := p.Tools[s.tools[0]].Objects[s.lang]; len(objs) > 0 {
			object = objs[0]
		}
		out = append(out, fmt.Sprintf("tools %s share the verb %q (%s): a question that names it must also name the tool's object (\"%s the %s\", not \"%s it\"), or it is refused for each",
			strings.Join(s.tools, ", "), s.word, s.lang, s.word, object, s.word))
	}
	return out
}

// Warnings are the policy's start-up warnings: shared objects, then
// shared verbs.
func (p *Policy) Warnings() []string { return append(p.SharedObjects(), p.SharedVerbs()...) }

type sharedWord struct {
	lang, word string
	tools      []string
}

// shared returns each word (folded to lower case) that two tools needing
// confirmation list in one language, in the lists words picks, sorted.
func (p *Policy) shared(words func(*Tool) map[string][]string) []sharedWord {
	type key struct{ lang, word string }
	owners := map[key][]string{}
	for _, name := range slices.Sorted(maps.Keys(p.Tools)) {
		t := p.Tools[name]
		if t == nil || !t.NeedsConfirm() {
			continue
		}
		for lang, ws := range words(t) {
			for _, w := range ws {
				k := key{lang, strings.ToLower(strings.TrimSpace(w))}
				if !slices.Contains(owners[k], name) {
					owners[k] = append(owners[k], name)
				}
			}
		}
	}
	var out []sharedWord
	for k, names := range owners {
		if len(names) > 1 {
			out = append(out, sharedWord{lang: k.lang, word: k.word, tools: names})
		}
	}
	slices.SortFunc(out, func(a, b sharedWord) int {
		if c := strings.Compare(strings.Join(a.tools, ","), strings.Join(b.tools, ",")); c != 0 {
			return c
		}
		if c := strings.Compare(a.word, b.word); c != 0 {
			return c
		}
		return strings.Compare(a.lang, b.lang)
	})
	return out
}
