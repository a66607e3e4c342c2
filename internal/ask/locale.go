// Package ask writes the guard's own question: one short sentence, in the
// call's language, that asks leave for a tool's action and states its
// bound arguments as people say them ("Shall I pay the bill of €71.35
// now?", "¿Le reservo la cita del martes 8 de diciembre a las 15:00?").
//
// Languages are data: locales/ask/<lang>.yaml holds, for each, the frame
// of the default question, the names of weekdays and months, the 12- or
// 24-hour habit, the decimal comma and how an amount of money is written
// (docs/locales.md, "The guard's question"). Every file is validated when
// it is loaded; a bad one fails the load, naming the field.
package ask

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/yesguard/yesguard/locales"
)

// Locale is how one language says the guard's question.
type Locale struct {
	Lang string `yaml:"lang"`
	// Frame is the question of a tool with no template of its own:
	// {verb} and {object} are the tool's first verb and object in this
	// language, {values} its bound arguments (Values, with {list}).
	Frame string `yaml:"frame"`
	// FrameVerbOnly is Frame for a tool with a verb and no object.
	FrameVerbOnly string `yaml:"frame_verb_only"`
	// Values joins the bound arguments to the frame: " of {list}".
	Values string `yaml:"values"`
	// ListAnd joins the last two of several values ("and").
	ListAnd string `yaml:"list_and"`
	// DecimalComma: 71,35 rather than 71.35.
	DecimalComma bool `yaml:"decimal_comma"`
	// Thousands separates groups of three digits ("," "." " ").
	Thousands string `yaml:"thousands"`
	// HourCycle is 12 (3:00 PM) or 24 (15:00).
	HourCycle int `yaml:"hour_cycle"`
	// AM and PM mark the 12-hour clock's halves.
	AM string `yaml:"am"`
	PM string `yaml:"pm"`
	// Date writes a date from {weekday}, {day}, {month} and {year}.
	Date string `yaml:"date"`
	// Weekdays, Monday first; Months, January first.
	Weekdays []string `yaml:"weekdays"`
	Months   []string `yaml:"months"`
	// Currency writes an amount from {symbol} and {amount}.
	Currency string `yaml:"currency"`
	// Symbols by ISO 4217 code; a currency with none is written by its
	// code.
	Symbols map[string]string `yaml:"symbols"`
}

// Set is the loaded locales by language.
type Set struct{ byLang map[string]*Locale }

// Load reads the embedded locales/ask/*.yaml.
func Load() (*Set, error) { return LoadFS(locales.AskFS) }

// LoadFS reads every ask/<lang>.yaml of fsys.
func LoadFS(fsys fs.FS) (*Set, error) {
	names, err := fs.Glob(fsys, "ask/*.yaml")
	if err != nil {
		return nil, fmt.Errorf("ask locales: %w", err)
	}
	if len(names) == 0 {
		return nil, errors.New("ask locales: no ask/<lang>.yaml")
	}
	s := &Set{byLang: map[string]*Locale{}}
	var errs []error
	for _, name := range names {
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			continue
		}
		l, err := Parse(data)
		if err == nil && l.Lang != strings.TrimSuffix(path.Base(name), ".yaml") {
			err = fmt.Errorf("lang: %q in a file named for another language", l.Lang)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			continue
		}
		s.byLang[l.Lang] = l
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return s, nil
}

// Parse reads one locale, rejecting unknown fields, and validates it.
func Parse(data []byte) (*Locale, error) {
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true)
	l := new(Locale)
	if err := dec.Decode(l); err != nil {
		return nil, err
	}
	return l, l.Validate()
}

var (
	placeholderRE = regexp.MustCompile(`\{([A-Za-z0-9_]*)\}`)
	codeRE        = regexp.MustCompile(`^[A-Z]{3}$`)
)

// Placeholders returns the names written {name} in s, in order.
func Placeholders(s string) []string {
	var out []string
	for _, m := range placeholderRE.FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}

// Validate reports every problem of l at once, each naming its field.
func (l *Locale) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if l.Lang == "" {
		bad("lang", "missing")
	}
	for _, f := range []struct {
		name, v  string
		allowed  []string
		required []string
	}{
		{"frame", l.Frame, []string{"verb", "object", "values"}, []string{"verb", "object"}},
		{"frame_verb_only", l.FrameVerbOnly, []string{"verb", "values"}, []string{"verb"}},
		{"values", l.Values, []string{"list"}, []string{"list"}},
		{"date", l.Date, []string{"weekday", "day", "month", "year"}, []string{"day", "month"}},
		{"currency", l.Currency, []string{"symbol", "amount"}, []string{"amount"}},
	} {
		if strings.TrimSpace(f.v) == "" {
			bad(f.name, "missing")
			continue
		}
		got := Placeholders(f.v)
		for _, p := range got {
			if !slices.Contains(f.allowed, p) {
				bad(f.name, "{%s} is not one of {%s}", p, strings.Join(f.allowed, "}, {"))
			}
		}
		for _, p := range f.required {
			if !slices.Contains(got, p) {
				bad(f.name, "needs {%s}", p)
			}
		}
	}
	if strings.TrimSpace(l.ListAnd) == "" {
		bad("list_and", "missing")
	}
	if l.HourCycle != 12 && l.HourCycle != 24 {
		bad("hour_cycle", "12 or 24, got %d", l.HourCycle)
	}
	if l.HourCycle == 12 && (strings.TrimSpace(l.AM) == "" || strings.TrimSpace(l.PM) == "") {
		bad("am", "a 12-hour clock needs am and pm")
	}
	if (l.DecimalComma && l.Thousands == ",") || (!l.DecimalComma && l.Thousands == ".") {
		bad("thousands", "%q is the decimal mark too", l.Thousands)
	}
	if len(l.Weekdays) != 7 {
		bad("weekdays", "seven names, Monday first; got %d", len(l.Weekdays))
	}
	if len(l.Months) != 12 {
		bad("months", "twelve names, January first; got %d", len(l.Months))
	}
	for i, n := range append(slices.Clone(l.Weekdays), l.Months...) {
		if strings.TrimSpace(n) == "" {
			bad("weekdays/months", "name %d is empty", i+1)
		}
	}
	for _, c := range slices.Sorted(maps.Keys(l.Symbols)) {
		if !codeRE.MatchString(c) {
			bad("symbols."+c, "not an ISO 4217 code")
		}
	}
	return errors.Join(errs...)
}

// Get returns the locale of a language tag: the exact tag, else its
// language ("es-MX" → "es"); nil when none.
func (s *Set) Get(tag string) *Locale {
	if s == nil {
		return nil
	}
	if l := s.byLang[tag]; l != nil {
		return l
	}
	if i := strings.IndexByte(tag, '-'); i > 0 {
		return s.byLang[strings.ToLower(tag[:i])]
	}
	return s.byLang[strings.ToLower(tag)]
}

// Langs lists the loaded languages, sorted.
func (s *Set) Langs() []string { return slices.Sorted(maps.Keys(s.byLang)) }
