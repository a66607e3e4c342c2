package ask

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The formats of an argument's value.
const (
	// FormatCurrency: a number, written as an amount of Format.Currency
	// (or of the call's CurrencyArg) in the locale's way: "€71.35",
	// "71,35 €".
	FormatCurrency = "currency"
	// FormatDate: an ISO date (2026-12-08, or the date of an RFC 3339
	// time), written with the weekday and month names: "Tuesday,
	// December 8", "martes 8 de diciembre".
	FormatDate = "date"
	// FormatTime: a time of day (15:00, 15:00:00, or that of an RFC 3339
	// time), on the locale's clock: "3:00 PM", "15:00".
	FormatTime = "time"
	// FormatString: the value as it is.
	FormatString = "string"
	// FormatNumber: a number with the locale's decimal mark.
	FormatNumber = "number"
)

// Formats are every format an argument may take.
var Formats = []string{FormatCurrency, FormatDate, FormatTime, FormatString, FormatNumber}

// Format says how one argument is said.
type Format struct {
	// Kind is one of Formats; empty guesses from the value (a number, an
	// ISO date, a time of day, else a string).
	Kind string
	// Currency is the ISO 4217 code of a currency amount.
	Currency string
	// CurrencyArg names the argument holding the code instead.
	CurrencyArg string
}

// Tool is what the question of one tool is made from.
type Tool struct {
	// Templates per language, with arguments as {name} placeholders.
	Templates map[string]string
	// Verb and Object per language: the first the policy gives; the
	// default question is built from them when no template is written.
	Verb, Object map[string]string
	// Bind names the arguments the default question states.
	Bind []string
	// Formats per argument.
	Formats map[string]Format
}

// ErrNoQuestion: the language has neither a template nor a verb for the
// tool, so no question can be written in it.
var ErrNoQuestion = errors.New("no ask template and no verb for this language")

// Render writes t's question in lang with args (as JSON decodes them). It
// fails when an argument the question states is missing or of the wrong
// kind, and when lang has no locale or no way to ask (ErrNoQuestion).
func (s *Set) Render(t Tool, lang string, args map[string]any) (string, error) {
	l := s.Get(lang)
	if l == nil {
		return "", fmt.Errorf("no ask locale for %q", lang)
	}
	tmpl := pick(t.Templates, lang)
	if tmpl == "" {
		verb, object := pick(t.Verb, lang), pick(t.Object, lang)
		if verb == "" {
			return "", ErrNoQuestion
		}
		var vals []string
		for _, name := range t.Bind {
			v, err := l.Value(name, args, t.Formats)
			if err != nil {
				return "", err
			}
			vals = append(vals, v)
		}
		values := ""
		if len(vals) > 0 {
			values = strings.ReplaceAll(l.Values, "{list}", l.list(vals))
		}
		frame := l.Frame
		if object == "" {
			frame = l.FrameVerbOnly
		}
		out := strings.NewReplacer("{verb}", verb, "{object}", object, "{values}", values).Replace(frame)
		return tidy(out), nil
	}
	var err error
	out := placeholderRE.ReplaceAllStringFunc(tmpl, func(m string) string {
		name := m[1 : len(m)-1]
		v, e := l.Value(name, args, t.Formats)
		if e != nil && err == nil {
			err = e
		}
		return v
	})
	if err != nil {
		return "", err
	}
	return tidy(out), nil
}

// pick returns m's entry for a tag: exact, then its language.
func pick(m map[string]string, tag string) string {
	if v, ok := m[tag]; ok {
		return v
	}
	if i := strings.IndexByte(tag, '-'); i > 0 {
		return m[tag[:i]]
	}
	return ""
}

func tidy(s string) string { return strings.Join(strings.Fields(s), " ") }

func (l *Locale) list(vals []string) string {
	if len(vals) == 1 {
		return vals[0]
	}
	return strings.Join(vals[:len(vals)-1], ", ") + " " + l.ListAnd + " " + vals[len(vals)-1]
}

var (
	isoDateRE = regexp.MustCompile(`^(\d{4})-(\d{2})-(\d{2})(?:[T ].*)?$`)
	clockRE   = regexp.MustCompile(`^(?:\d{4}-\d{2}-\d{2}[T ])?(\d{1,2}):(\d{2})(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?$`)
)

// Value writes argument name of args as its format says.
func (l *Locale) Value(name string, args map[string]any, formats map[string]Format) (string, error) {
	raw, ok := args[name]
	if !ok || raw == nil {
		return "", fmt.Errorf("argument %q: missing", name)
	}
	f := formats[name]
	kind := f.Kind
	if kind == "" {
		kind = guess(raw)
	}
	switch kind {
	case FormatCurrency:
		n, ok := number(raw)
		if !ok {
			return "", fmt.Errorf("argument %q: %v is not an amount", name, raw)
		}
		code := f.Currency
		if f.CurrencyArg != "" {
			c, _ := args[f.CurrencyArg].(string)
			code = strings.ToUpper(strings.TrimSpace(c))
		}
		if !codeRE.MatchString(code) {
			return "", fmt.Errorf("argument %q: no currency code (got %q)", name, code)
		}
		sym := l.Symbols[code]
		if sym == "" {
			sym = code
		}
		amount := l.Number(n, true)
		out := strings.NewReplacer("{symbol}", sym, "{amount}", amount).Replace(l.Currency)
		return strings.TrimSpace(out), nil
	case FormatNumber:
		n, ok := number(raw)
		if !ok {
			return "", fmt.Errorf("argument %q: %v is not a number", name, raw)
		}
		return l.Number(n, false), nil
	case FormatDate:
		s, _ := raw.(string)
		d, ok := parseDate(s)
		if !ok {
			return "", fmt.Errorf("argument %q: %v is not an ISO date (2026-12-08)", name, raw)
		}
		return l.DateOf(d), nil
	case FormatTime:
		s, _ := raw.(string)
		h, m, ok := parseClock(s)
		if !ok {
			return "", fmt.Errorf("argument %q: %v is not a time of day (15:00)", name, raw)
		}
		return l.Clock(h, m), nil
	case FormatString:
		switch v := raw.(type) {
		case string:
			return strings.TrimSpace(v), nil
		case float64:
			return l.Number(v, false), nil
		case bool:
			return strconv.FormatBool(v), nil
		}
		return "", fmt.Errorf("argument %q: %v is not a plain value", name, raw)
	}
	return "", fmt.Errorf("argument %q: unknown format %q", name, kind)
}

func guess(v any) string {
	switch v := v.(type) {
	case float64, int, int64:
		return FormatNumber
	case string:
		if isoDateRE.MatchString(v) && !strings.ContainsAny(v[10:], ":") {
			return FormatDate
		}
		if clockRE.MatchString(v) && !isoDateRE.MatchString(v) {
			return FormatTime
		}
	}
	return FormatString
}

func number(v any) (float64, bool) {
	switch v := v.(type) {
	case float64:
		return v, !math.IsNaN(v) && !math.IsInf(v, 0)
	case int:
		return float64(v), true
	case int64:
		return float64(v), true
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		return f, err == nil && !math.IsNaN(f) && !math.IsInf(f, 0)
	}
	return 0, false
}

// Number writes n with the locale's marks: whole numbers without
// decimals, others with two when money (71.35, 71.30) and as few as
// needed otherwise.
func (l *Locale) Number(n float64, money bool) string {
	neg := n < 0
	n = math.Abs(n)
	var s string
	switch {
	case n == math.Trunc(n) && n < 1e15:
		s = strconv.FormatFloat(n, 'f', 0, 64)
	case money:
		s = strconv.FormatFloat(n, 'f', 2, 64)
	default:
		s = strconv.FormatFloat(n, 'f', -1, 64)
	}
	whole, frac, _ := strings.Cut(s, ".")
	if len(whole) > 4 || (len(whole) == 4 && l.Thousands != " ") {
		var b strings.Builder
		for i, r := range whole {
			if i > 0 && (len(whole)-i)%3 == 0 {
				b.WriteString(l.Thousands)
			}
			b.WriteRune(r)
		}
		whole = b.String()
	}
	out := whole
	if frac != "" {
		mark := "."
		if l.DecimalComma {
			mark = ","
		}
		out += mark + frac
	}
	if neg {
		out = "-" + out
	}
	return out
}

func parseDate(s string) (time.Time, bool) {
	m := isoDateRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return time.Time{}, false
	}
	d, err := time.Parse("2006-01-02", m[1]+"-"+m[2]+"-"+m[3])
	return d, err == nil
}

func parseClock(s string) (h, m int, ok bool) {
	g := clockRE.FindStringSubmatch(strings.TrimSpace(s))
	if g == nil {
		return 0, 0, false
	}
	h, _ = strconv.Atoi(g[1])
	m, _ = strconv.Atoi(g[2])
	return h, m, h < 24 && m < 60
}

// DateOf writes d with the locale's names.
func (l *Locale) DateOf(d time.Time) string {
	wd := (int(d.Weekday()) + 6) % 7 // Monday first
	return tidy(strings.NewReplacer(
		"{weekday}", l.Weekdays[wd], "{day}", strconv.Itoa(d.Day()),
		"{month}", l.Months[d.Month()-1], "{year}", strconv.Itoa(d.Year()),
	).Replace(l.Date))
}

// Clock writes a time of day on the locale's clock.
func (l *Locale) Clock(h, m int) string {
	if l.HourCycle == 24 {
		return fmt.Sprintf("%d:%02d", h, m)
	}
	half := l.AM
	if h >= 12 {
		half = l.PM
	}
	h12 := h % 12
	if h12 == 0 {
		h12 = 12
	}
	return fmt.Sprintf("%d:%02d %s", h12, m, half)
}

// Normalise folds text for matching an ask to the agent's turn: lower
// case, accents and punctuation dropped, one space between words.
func Normalise(s string) string {
	var b strings.Builder
	space := true
	for _, r := range foldAccents(strings.ToLower(s)) {
		if isWord(r) {
			b.WriteRune(r)
			space = false
		} else if !space {
			b.WriteByte(' ')
			space = true
		}
	}
	return strings.TrimSpace(b.String())
}
