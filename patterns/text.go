package patterns

import (
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/runes"
	"golang.org/x/text/transform"
	"golang.org/x/text/unicode/norm"
)

// Sentence is one sentence of a text, tokenised.
type Sentence struct {
	// Raw is the sentence as written, trimmed.
	Raw string
	// Tokens are its folded words and numbers; punctuation is dropped.
	Tokens []string
	// Marked is true when the sentence ends in "?" or opens with "¿".
	Marked bool
}

// Text is a tokenised text.
type Text struct {
	Sentences []Sentence
}

// Tokens returns every sentence's tokens, in order.
func (t Text) Tokens() []string {
	n := 0
	for _, s := range t.Sentences {
		n += len(s.Tokens)
	}
	out := make([]string, 0, n)
	for _, s := range t.Sentences {
		out = append(out, s.Tokens...)
	}
	return out
}

// accentFolders holds transformers that remove accents. A transformer
// keeps state while it runs, so each Fold takes its own: Fold runs in
// concurrent checks.
var accentFolders = sync.Pool{New: func() any {
	return transform.Chain(norm.NFD, runes.Remove(runes.In(unicode.Mn)), norm.NFC)
}}

// Fold lower-cases s, removes accents and straightens quotes, so that
// "Envíe" and "envie" compare equal.
func Fold(s string) string {
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if !ascii {
		t := accentFolders.Get().(transform.Transformer)
		if f, _, err := transform.String(t, s); err == nil {
			s = f
		}
		accentFolders.Put(t)
		s = strings.Map(func(r rune) rune {
			switch r {
			case '\u2019', '\u2018', '\u02bc', '`', '\u00b4':
				return '\''
			case '\u00df':
				return -1 // handled below
			}
			return r
		}, strings.ReplaceAll(s, "\u00df", "ss"))
	}
	return strings.ToLower(s)
}

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

func isSentenceEnd(r rune) bool {
	switch r {
	case '.', '!', '?', ';', '\u2026', '\n':
		return true
	}
	return false
}

// Parse folds and tokenises text into sentences. Numbers keep their
// separators ("1,200.50" is one token); elisions listed by the locale are
// split off the word they lead.
func (l *Locale) Parse(text string) Text {
	folded := Fold(text)
	var out Text
	rs := []rune(folded)
	rawStart := 0
	cur := Sentence{}
	flush := func(end int) {
		raw := strings.TrimSpace(string(rs[rawStart:end]))
		if len(cur.Tokens) > 0 || raw != "" {
			cur.Raw = raw
			if len(cur.Tokens) > 0 {
				out.Sentences = append(out.Sentences, cur)
			}
		}
		cur = Sentence{}
		rawStart = end
	}
	for i := 0; i < len(rs); {
		r := rs[i]
		switch {
		case unicode.IsDigit(r):
			j := i + 1
			for j < len(rs) {
				if unicode.IsDigit(rs[j]) {
					j++
					continue
				}
				if (rs[j] == '.' || rs[j] == ',') && j+1 < len(rs) && unicode.IsDigit(rs[j+1]) {
					j += 2
					continue
				}
				break
			}
			cur.Tokens = append(cur.Tokens, string(rs[i:j]))
			// "am 12. Mai": with ordinal_dot, a dot after a number of one
			// or two digits and before a word is an ordinal's, not a
			// sentence end.
			if l != nil && l.ordinalDot && j-i <= 2 && j+2 < len(rs) && rs[j] == '.' &&
				rs[j+1] == ' ' && unicode.IsLetter(rs[j+2]) {
				j++
			}
			i = j
		case isWordRune(r):
			j := i + 1
			for j < len(rs) {
				if isWordRune(rs[j]) {
					j++
					continue
				}
				if (rs[j] == '\'' || rs[j] == '-') && j+1 < len(rs) && unicode.IsLetter(rs[j+1]) {
					j += 2
					continue
				}
				break
			}
			cur.Tokens = append(cur.Tokens, l.splitWord(string(rs[i:j]))...)
			i = j
		case r == '\u00bf': // ¿ opens a question
			cur.Marked = true
			i++
		case r == '?':
			cur.Marked = true
			i++
			flush(i)
		case isSentenceEnd(r):
			i++
			flush(i)
		default:
			i++
		}
	}
	flush(len(rs))
	return out
}

// clitic is a word's ending split off and read as a word of its own.
type clitic struct {
	suffix string // "'s"
	word   string // "es"
}

// splitWord splits elisions ("j'envoie" → "j'", "envoie"), clitics
// ("geht's" → "geht", "es") and hyphenated words ("allez-y" → "allez",
// "y").
func (l *Locale) splitWord(w string) []string {
	if l != nil {
		for _, e := range l.elisions {
			if len(w) > len(e) && strings.HasPrefix(w, e) {
				return append([]string{e}, l.splitWord(w[len(e):])...)
			}
		}
		for _, c := range l.clitics {
			if len(w) > len(c.suffix) && strings.HasSuffix(w, c.suffix) {
				return append(l.splitWord(w[:len(w)-len(c.suffix)]), c.word)
			}
		}
	}
	if strings.ContainsRune(w, '-') {
		return strings.Split(w, "-")
	}
	return []string{w}
}

// ParseNumber reads a numeric token as a number, using the locale's decimal
// separator: with a decimal comma "1.200,50" is 1200.5; without one
// "1,200.50" is. A separator followed by other than three digits is read as
// the decimal mark whatever the locale ("120,50" is 120.5 in English too).
func (l *Locale) ParseNumber(tok string) (float64, bool) {
	if tok == "" || !unicode.IsDigit(rune(tok[0])) {
		if l != nil {
			if v, ok := l.numberWords[tok]; ok {
				return v, true
			}
		}
		return 0, false
	}
	lastDot := strings.LastIndexByte(tok, '.')
	lastComma := strings.LastIndexByte(tok, ',')
	dec := byte(0)
	switch {
	case lastDot >= 0 && lastComma >= 0:
		if lastDot > lastComma {
			dec = '.'
		} else {
			dec = ','
		}
	case lastDot >= 0 || lastComma >= 0:
		sep := byte('.')
		idx := lastDot
		if lastComma >= 0 {
			sep, idx = ',', lastComma
		}
		groupsOfThree := len(tok)-idx-1 == 3 && strings.Count(tok, string(sep)) >= 1
		localeDec := byte('.')
		if l != nil && l.decimalComma {
			localeDec = ','
		}
		switch {
		case strings.Count(tok, string(sep)) > 1:
			dec = 0 // 1,200,000: thousands only
		case sep == localeDec:
			dec = sep
		case groupsOfThree:
			dec = 0
		default:
			dec = sep
		}
	}
	var b strings.Builder
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		switch {
		case c >= '0' && c <= '9':
			b.WriteByte(c)
		case c == dec:
			b.WriteByte('.')
		}
	}
	v, err := strconv.ParseFloat(b.String(), 64)
	return v, err == nil
}

// Numbers returns every number stated in text: numerals and the locale's
// number words.
func (l *Locale) Numbers(t Text) []float64 {
	var out []float64
	for _, s := range t.Sentences {
		for _, tok := range s.Tokens {
			if v, ok := l.ParseNumber(tok); ok {
				out = append(out, v)
			}
		}
	}
	return out
}
