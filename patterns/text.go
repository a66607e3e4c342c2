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
	// Breaks are the token indices where a comma, colon or dash split
	// the sentence into clauses: Breaks holds i when a break stood
	// before Tokens[i].
	Breaks []int
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
	folded := l.fold(protectAcronyms(text))
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
				// "1 200,50 €": with a decimal comma, a space before
				// exactly three digits groups thousands.
				if l != nil && l.decimalComma && isGroupSpace(rs[j]) && threeDigits(rs, j+1) && !strings.ContainsRune(string(rs[i:j]), ',') {
					j += 4
					continue
				}
				break
			}
			cur.Tokens = append(cur.Tokens, strings.Map(dropSpace, string(rs[i:j])))
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
		case r == '.' && l.keepsDot(rs, i, cur.Tokens):
			i++
		case isSentenceEnd(r):
			i++
			flush(i)
		case r == ',' || r == ':' || r == '\u2013' || r == '\u2014':
			if n := len(cur.Tokens); n > 0 && (len(cur.Breaks) == 0 || cur.Breaks[len(cur.Breaks)-1] != n) {
				cur.Breaks = append(cur.Breaks, n)
			}
			i++
		default:
			i++
		}
	}
	flush(len(rs))
	return out
}

// keepsDot reports whether the dot at rs[i] is not a sentence end: it
// follows one of the locale's abbreviations ("Dr. Patel"), or it is a dot
// of a letter-by-letter abbreviation ("3 p.m. on Tuesday").
func (l *Locale) keepsDot(rs []rune, i int, toks []string) bool {
	if i+1 >= len(rs) {
		return false
	}
	if l != nil && len(toks) > 0 && i > 0 && isWordRune(rs[i-1]) && l.abbreviations[toks[len(toks)-1]] {
		return true
	}
	single := func(k int) bool { // rs[k] is a one-letter word
		return k >= 0 && unicode.IsLetter(rs[k]) && (k == 0 || !isWordRune(rs[k-1]))
	}
	// The first dot of "p.m." (p . m .); protectAcronyms takes care of
	// the last.
	if single(i-1) && i+2 < len(rs) && unicode.IsLetter(rs[i+1]) && (rs[i+2] == '.' || rs[i+2] == '\u2024') {
		return true
	}
	return false
}

// protectAcronyms replaces the last dot of a letter-by-letter abbreviation
// ("p.m.") with a dot leader when the sentence goes on in lower case or
// with a number ("3 p.m. on Tuesday"), so that it does not end the
// sentence. It reads the text before folding, while case still shows.
func protectAcronyms(text string) string {
	if !strings.Contains(text, ".") {
		return text
	}
	rs := []rune(text)
	single := func(k int) bool {
		return k >= 0 && unicode.IsLetter(rs[k]) && (k == 0 || !isWordRune(rs[k-1]))
	}
	changed := false
	for i := 3; i < len(rs); i++ {
		if rs[i] != '.' || !unicode.IsLetter(rs[i-1]) || rs[i-2] != '.' || !single(i-3) {
			continue
		}
		k := i + 1
		for k < len(rs) && rs[k] == ' ' {
			k++
		}
		if k > i+1 && k < len(rs) && (unicode.IsLower(rs[k]) || unicode.IsDigit(rs[k])) {
			rs[i] = '\u2024'
			changed = true
		}
	}
	if !changed {
		return text
	}
	return string(rs)
}

func isGroupSpace(r rune) bool { return r == ' ' || r == '\u00a0' || r == '\u202f' }

// threeDigits reports whether rs[k:k+3] are digits and no digit follows.
func threeDigits(rs []rune, k int) bool {
	if k+3 > len(rs) {
		return false
	}
	for _, r := range rs[k : k+3] {
		if !unicode.IsDigit(r) {
			return false
		}
	}
	return k+3 == len(rs) || !unicode.IsDigit(rs[k+3])
}

func dropSpace(r rune) rune {
	if isGroupSpace(r) {
		return -1
	}
	return r
}

// keptToken is how a word of keep_accents stands after folding: its
// folded form and a mark no text holds, so "sí" never equals "si".
func keptToken(w string) string { return Fold(w) + "\u02b9" }

// fold folds s, keeping the words of keep_accents apart.
func (l *Locale) fold(s string) string {
	if l == nil || len(l.keepAccents) == 0 {
		return Fold(s)
	}
	rs := []rune(norm.NFC.String(s))
	var b strings.Builder
	for i := 0; i < len(rs); {
		if !unicode.IsLetter(rs[i]) {
			b.WriteRune(rs[i])
			i++
			continue
		}
		j := i
		for j < len(rs) && unicode.IsLetter(rs[j]) {
			j++
		}
		w := string(rs[i:j])
		if k, ok := l.keepAccents[strings.ToLower(w)]; ok {
			b.WriteString(k)
		} else {
			b.WriteString(w)
		}
		i = j
	}
	return Fold(b.String())
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
