package guard

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/yesguard/yesguard/metrics"
	"github.com/yesguard/yesguard/patterns"
)

// ruleset is one policy with its locales, compiled. It is immutable once
// built; Reload swaps in a new one.
type ruleset struct {
	policy  *Policy
	locales *patterns.Set
	version string

	// tools are the listed tools' rules, built with the ruleset.
	tools map[string]*toolRules
	// unlisted keeps the rules of tools the policy does not list, at most
	// maxUnlistedTools of them (nUnlisted counts them).
	unlisted  sync.Map // name → *toolRules
	nUnlisted atomic.Int64

	// compiled caches the actions of the tools in tools and unlisted, per
	// language.
	compiled sync.Map // actionKey → *patterns.Action
}

// maxUnlistedTools bounds how many tools the policy does not list keep
// their compiled rules: the model names the tools, so their number has no
// bound of its own. Past it, an unlisted tool's rules are compiled at each
// Check (the same rules, more slowly).
const maxUnlistedTools = 256

type actionKey struct {
	tool, lang string
	others     bool
}

func newRuleset(p *Policy, l *patterns.Set) (*ruleset, error) {
	if p == nil || l == nil {
		return nil, errors.New("guard: a policy and locales are required")
	}
	if l.Get(p.Defaults.DefaultLang) == nil {
		return nil, fmt.Errorf("defaults.default_lang: no locale for %q (loaded: %s)",
			p.Defaults.DefaultLang, strings.Join(l.Langs(), ", "))
	}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(p.Tools)) {
		t := p.Tools[name]
		for kind, m := range map[string]map[string][]string{"verbs": t.Verbs, "objects": t.Objects} {
			for _, lang := range slices.Sorted(maps.Keys(m)) {
				if l.Get(lang) == nil {
					errs = append(errs, fmt.Errorf("tools.%s.%s.%s: no locale for this language (loaded: %s)",
						name, kind, lang, strings.Join(l.Langs(), ", ")))
				}
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	version := p.Version()
	if version == "" {
		version = "builtin"
	}
	rs := &ruleset{policy: p, locales: l, version: version + "+locales:" + l.Version(), tools: make(map[string]*toolRules, len(p.Tools))}
	for name, t := range p.Tools {
		rs.tools[name] = &toolRules{name: name, cached: true, entry: t, label: name}
	}
	return rs, nil
}

// toolRules is what the rules need of one tool.
type toolRules struct {
	name  string
	entry *Tool
	// label is the metrics label: the name for listed tools, else "other".
	label string
	// cached: the ruleset keeps this tool's compiled actions.
	cached bool
	// compound: the policy does not list the tool and its name joins
	// several actions ("submit_appeal_and_close_account"); no yes to one
	// of them allows it.
	compound bool
}

// tool returns the rules of the named tool. They are shared and must not
// be changed.
func (rs *ruleset) tool(name string) *toolRules {
	if t, ok := rs.tools[name]; ok {
		return t
	}
	if t, ok := rs.unlisted.Load(name); ok {
		return t.(*toolRules)
	}
	t := &toolRules{name: name, entry: &Tool{}, label: metrics.OtherTool, compound: joinsActions(nameWords(name))}
	if rs.nUnlisted.Load() < maxUnlistedTools {
		// Concurrent first Checks of new tools may overshoot the bound by
		// their number, no more.
		t.cached = true
		if prev, loaded := rs.unlisted.LoadOrStore(name, t); loaded {
			return prev.(*toolRules)
		}
		rs.nUnlisted.Add(1)
		return t
	}
	return t
}

func (t *toolRules) confirm() bool { return t.entry.NeedsConfirm() }

// words returns the tool's verbs and objects in lang: the policy's for the
// language (or its base language), else those its name gives.
func (t *toolRules) words(lang string) (verbs, objects []string) {
	base := lang
	if i := strings.IndexAny(lang, "-_"); i > 0 {
		base = lang[:i]
	}
	verbs, objects = t.entry.Verbs[lang], t.entry.Objects[lang]
	if base != lang {
		verbs = append(append([]string(nil), verbs...), t.entry.Verbs[base]...)
		objects = append(append([]string(nil), objects...), t.entry.Objects[base]...)
	}
	if len(verbs) == 0 {
		w := nameWords(t.name)
		if len(w) > 0 {
			verbs = []string{w[0]}
			if len(objects) == 0 && len(w) > 1 {
				objects = []string{strings.Join(w[1:], " ")}
				if len(w) > 2 {
					objects = append(objects, w[len(w)-1])
				}
			}
		}
	}
	return verbs, objects
}

// action returns the tool's action compiled for loc.
func (rs *ruleset) action(t *toolRules, loc *patterns.Locale) *patterns.Action {
	key := actionKey{tool: t.name, lang: loc.Lang()}
	if t.cached {
		if a, ok := rs.compiled.Load(key); ok {
			return a.(*patterns.Action)
		}
	}
	v, o := t.words(loc.Lang())
	shared, rivals := rs.sharedVerbs(t, loc.Lang(), v)
	a := loc.CompileTool(v, o, shared, rivals)
	if t.cached {
		rs.compiled.Store(key, a)
	}
	return a
}

// sharedVerbs returns those of verbs (t's, in lang) that another listed
// tool needing confirmation lists too, and the objects of those tools.
func (rs *ruleset) sharedVerbs(t *toolRules, lang string, verbs []string) (shared, rivals []string) {
	for _, name := range slices.Sorted(maps.Keys(rs.policy.Tools)) {
		o := rs.tools[name]
		if name == t.name || !o.confirm() {
			continue
		}
		ov, oo := o.words(lang)
		rival := false
		for _, v := range verbs {
			for _, w := range ov {
				if patterns.Fold(strings.TrimSpace(v)) == patterns.Fold(strings.TrimSpace(w)) {
					rival = true
					if !slices.Contains(shared, v) {
						shared = append(shared, v)
					}
				}
			}
		}
		if rival {
			rivals = append(rivals, oo...)
		}
	}
	return shared, rivals
}

// conjunctions joins actions in a tool's name: "submit_appeal_and_close_account".
var nameConjunctions = []string{"and", "or", "then", "plus"}

// joinsActions reports whether a tool name's words join several actions.
func joinsActions(words []string) bool {
	for _, w := range words[min(1, len(words)):] {
		if slices.Contains(nameConjunctions, w) {
			return true
		}
	}
	return false
}

// others returns the verbs and objects of every listed tool but t,
// compiled for loc: a question naming one of their verbs is about another
// action, and an object they share with t does not tell which action.
func (rs *ruleset) others(t *toolRules, loc *patterns.Locale) *patterns.Action {
	key := actionKey{tool: t.name, lang: loc.Lang(), others: true}
	if t.cached {
		if a, ok := rs.compiled.Load(key); ok {
			return a.(*patterns.Action)
		}
	}
	mine := map[string]bool{}
	v, _ := t.words(loc.Lang())
	for _, w := range v {
		mine[w] = true
	}
	var verbs, objects []string
	for _, name := range slices.Sorted(maps.Keys(rs.policy.Tools)) {
		if name == t.name {
			continue
		}
		ov, oo := rs.tools[name].words(loc.Lang())
		for _, w := range ov {
			if !mine[w] {
				verbs = append(verbs, w)
			}
		}
		objects = append(objects, oo...)
	}
	a := loc.MergeActions(verbs, objects)
	if t.cached {
		rs.compiled.Store(key, a)
	}
	return a
}

// phrasing names the tool's action for a message to the model in lang:
// in English words for the instruction, and as the plain question to ask,
// from the locale's template.
//
// A tool the policy gives no words in lang gets no example: its name's
// English words in the locale's template would be garbled ("¿Quiere que
// proceda a submit su appeal?"); the message then asks for the question in
// the caller's language.
func (rs *ruleset) phrasing(t *toolRules, lang string) phrasing {
	p := phrasing{action: t.describe(lang)}
	if loc := rs.locales.Get(lang); loc != nil && t.hasWords(loc.Lang()) {
		p.example = loc.AskFor(rs.action(t, loc))
	}
	return p
}

// hasWords reports whether the policy lists verbs for the tool in lang
// (a language code without region).
func (t *toolRules) hasWords(lang string) bool {
	return len(t.entry.Verbs[lang]) > 0
}

// describe names the tool's action for messages to the model:
// "submit the appeal".
func (t *toolRules) describe(lang string) string {
	v, o := t.words(lang)
	switch {
	case len(v) > 0 && len(o) > 0:
		return v[0] + " the " + o[0]
	case len(v) > 0:
		return v[0]
	default:
		return t.name
	}
}

// itemKey names the item a record tool records, from its item arguments;
// "" when the tool records nothing or the arguments are missing.
func (t *toolRules) itemKey(args map[string]*structpb.Value) string {
	r := t.entry.Record
	if r == nil {
		return ""
	}
	parts := make([]string, 0, len(r.Item))
	for _, name := range r.Item {
		v, ok := args[name]
		if !ok {
			return ""
		}
		b, err := canonicalValue(v)
		if err != nil {
			return ""
		}
		parts = append(parts, name+"="+string(b))
	}
	return strings.Join(parts, "&")
}

// quantitySet reports whether the call carries its quantity argument.
func (t *toolRules) quantitySet(args map[string]*structpb.Value) bool {
	r := t.entry.Record
	if r == nil || r.Quantity == "" {
		return false
	}
	v, ok := args[r.Quantity]
	if !ok {
		return false
	}
	_, isNull := v.GetKind().(*structpb.Value_NullValue)
	return !isNull
}

// patternsTool returns what the judge knows of tool t in loc's language:
// its action and every other confirmed tool's.
func (rs *ruleset) patternsTool(t *toolRules, loc *patterns.Locale) patterns.Tool {
	return patterns.Tool{Action: rs.action(t, loc), Others: rs.others(t, loc)}
}
