package patterns

import (
	"math"
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

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// Fold lower-cases s, removes accents and straightens quotes, so that
// "Envíe" and "envie" compare equal. Text in the Latin scripts folds
// through a table in one pass; anything else goes through Unicode
// normalisation (slowFold), with the same result.
func Fold(s string) string {
	if isASCII(s) {
		if strings.IndexByte(s, '`') >= 0 {
			s = strings.ReplaceAll(s, "`", "'")
		}
		return strings.ToLower(s)
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		switch {
		case r == '`':
			b.WriteByte('\'')
		case r < utf8.RuneSelf:
			if 'A' <= r && r <= 'Z' {
				r += 'a' - 'A'
			}
			b.WriteByte(byte(r))
		case r < latinTableEnd:
			b.WriteString(latinFold[r-utf8.RuneSelf])
		case isQuote(r):
			b.WriteByte('\'')
		case r == '\u2013' || r == '\u2014' || r == '\u2026' || r == '\u2024' || r == '\u202f' || r == '\u02b9':
			b.WriteRune(r)
		default:
			return slowFold(s)
		}
	}
	return b.String()
}

func isQuote(r rune) bool {
	switch r {
	case '\u2019', '\u2018', '\u02bc', '`', '\u00b4':
		return true
	}
	return false
}

// latinTableEnd bounds the runes latinFold covers: Latin-1 Supplement and
// Latin Extended-A and B.
const latinTableEnd = 0x250

// latinFold holds slowFold of each rune from U+0080 to latinTableEnd.
var latinFold = func() []string {
	t := make([]string, latinTableEnd-utf8.RuneSelf)
	for r := rune(utf8.RuneSelf); r < latinTableEnd; r++ {
		t[r-utf8.RuneSelf] = slowFold(string(r))
	}
	return t
}()

// slowFold is Fold through Unicode normalisation: decompose, drop the
// combining marks, recompose, then the quotes, ß and lower case.
func slowFold(s string) string {
	t := accentFolders.Get().(transform.Transformer)
	if f, _, err := transform.String(t, s); err == nil {
		s = f
	}
	accentFolders.Put(t)
	s = strings.Map(func(r rune) rune {
		if isQuote(r) {
			return '\''
		}
		return r
	}, strings.ReplaceAll(s, "\u00df", "ss"))
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
	// Tokens and Raw are substrings of the folded text: a word costs no
	// allocation of its own.
	s := l.fold(protectAcronyms(text))
	var out Text
	rawStart := 0
	// The sentences' tokens share one buffer, sized for the text's likely
	// token count, instead of each sentence growing its own (five or six
	// allocations a sentence). Each sentence's Tokens is capped at its
	// length, so appending to it cannot overwrite the next sentence's; a
	// text with more tokens than estimated just grows the buffer, as before.
	cur := Sentence{Tokens: make([]string, 0, len(s)/4+4)}
	flush := func(end int) {
		rest := cur.Tokens[len(cur.Tokens):]
		if n := len(cur.Tokens); n > 0 {
			cur.Raw = strings.TrimSpace(s[rawStart:end])
			cur.Tokens = cur.Tokens[:n:n]
			out.Sentences = append(out.Sentences, cur)
		}
		cur = Sentence{Tokens: rest}
		rawStart = end
	}
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case unicode.IsDigit(r):
			j := i + size
			for j < len(s) {
				r2, sz := utf8.DecodeRuneInString(s[j:])
				if unicode.IsDigit(r2) {
					j += sz
					continue
				}
				if (r2 == '.' || r2 == ',') && j+1 < len(s) {
					if r3, sz3 := utf8.DecodeRuneInString(s[j+1:]); unicode.IsDigit(r3) {
						j += 1 + sz3
						continue
					}
				}
				// "1 200,50 €": with a decimal comma, a space before
				// exactly three digits groups thousands.
				if l != nil && l.decimalComma && isGroupSpace(r2) && threeDigits(s, j+sz) && !strings.ContainsRune(s[i:j], ',') {
					j += sz + 3
					continue
				}
				break
			}
			tok := s[i:j]
			if strings.ContainsFunc(tok, isGroupSpace) {
				tok = strings.Map(dropSpace, tok)
			}
			cur.Tokens = append(cur.Tokens, tok)
			// "am 12. Mai", "am 15.12. um 10 Uhr": with ordinal_dot, a dot
			// after a number of one or two digits, or a day and month
			// ("15.12"), and before a word is an ordinal's, not a sentence
			// end.
			if l != nil && l.ordinalDot && (j-i <= 2 || isDayMonth(s[i:j])) && j+2 < len(s) && s[j] == '.' && s[j+1] == ' ' {
				if r3, _ := utf8.DecodeRuneInString(s[j+2:]); unicode.IsLetter(r3) {
					j++
				}
			}
			i = j
		case isWordRune(r):
			j := i + size
			for j < len(s) {
				r2, sz := utf8.DecodeRuneInString(s[j:])
				if isWordRune(r2) {
					j += sz
					continue
				}
				if (r2 == '\'' || r2 == '-') && j+1 < len(s) {
					if r3, sz3 := utf8.DecodeRuneInString(s[j+1:]); unicode.IsLetter(r3) {
						j += 1 + sz3
						continue
					}
				}
				break
			}
			cur.Tokens = l.appendSplit(cur.Tokens, s[i:j])
			i = j
		case r == '\u00bf': // ¿ opens a question
			cur.Marked = true
			i += size
		case r == '?':
			cur.Marked = true
			i += size
			flush(i)
		case r == '.' && l.keepsDot(s, i, cur.Tokens):
			i += size
		case isSentenceEnd(r):
			i += size
			flush(i)
		case r == ',' || r == ':' || r == '\u2013' || r == '\u2014':
			if n := len(cur.Tokens); n > 0 && (len(cur.Breaks) == 0 || cur.Breaks[len(cur.Breaks)-1] != n) {
				cur.Breaks = append(cur.Breaks, n)
			}
			i += size
		default:
			i += size
		}
	}
	flush(len(s))
	return out
}

// keepsDot reports whether the dot at rs[i] is not a sentence end: it
// follows one of the locale's abbreviations ("Dr. Patel"), or it is a dot
// of a letter-by-letter abbreviation ("3 p.m. on Tuesday").
func (l *Locale) keepsDot(s string, i int, toks []string) bool {
	if i+1 >= len(s) || i == 0 {
		return false
	}
	prev, psz := utf8.DecodeLastRuneInString(s[:i])
	if l != nil && len(toks) > 0 && isWordRune(prev) && l.abbreviations[toks[len(toks)-1]] {
		return true
	}
	// The first dot of "p.m." (p . m .); protectAcronyms takes care of
	// the last.
	if !unicode.IsLetter(prev) {
		return false
	}
	if before, _ := utf8.DecodeLastRuneInString(s[:i-psz]); i-psz > 0 && isWordRune(before) {
		return false
	}
	next, nsz := utf8.DecodeRuneInString(s[i+1:])
	if !unicode.IsLetter(next) || i+1+nsz >= len(s) {
		return false
	}
	n2, _ := utf8.DecodeRuneInString(s[i+1+nsz:])
	return n2 == '.' || n2 == '\u2024'
}

// protectAcronyms replaces the last dot of a letter-by-letter abbreviation
// ("p.m.") with a dot leader when the sentence goes on in lower case or
// with a number ("3 p.m. on Tuesday"), so that it does not end the
// sentence. It reads the text before folding, while case still shows.
func protectAcronyms(text string) string {
	// Only a text with ".x." can hold one.
	found := false
	for i := 2; i < len(text); i++ {
		if text[i] == '.' && text[i-2] == '.' && isASCIILetter(text[i-1]) {
			found = true
			break
		}
	}
	if !found {
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

// isDayMonth reports whether tok is a day and month in figures, "15.12".
func isDayMonth(tok string) bool {
	d, m, ok := strings.Cut(tok, ".")
	return ok && len(d) >= 1 && len(d) <= 2 && len(m) >= 1 && len(m) <= 2 && isDigits(d) && isDigits(m)
}

func isASCIILetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }

func isGroupSpace(r rune) bool { return r == ' ' || r == '\u00a0' || r == '\u202f' }

// threeDigits reports whether s[k:k+3] are ASCII digits and no digit
// follows.
func threeDigits(s string, k int) bool {
	if k+3 > len(s) {
		return false
	}
	for _, c := range []byte(s[k : k+3]) {
		if c < '0' || c > '9' {
			return false
		}
	}
	if k+3 == len(s) {
		return true
	}
	r, _ := utf8.DecodeRuneInString(s[k+3:])
	return !unicode.IsDigit(r)
}

func dropSpace(r rune) rune {
	if isGroupSpace(r) {
		return -1
	}
	return r
}

// isAccentedVowel reports whether r is a vowel with an acute or grave
// accent: "presentó" (did submit) is not "presento" (I submit).
func isAccentedVowel(r rune) bool {
	switch r {
	case 'á', 'é', 'í', 'ó', 'ú', 'à', 'è', 'ì', 'ò', 'ù':
		return true
	}
	return false
}

// unmark removes from s the marks keptToken leaves, for people to read.
func unmark(s string) string {
	if !strings.Contains(s, "\u02b9") {
		return s
	}
	return strings.ReplaceAll(s, "\u02b9", "")
}

// keptToken is how a word of keep_accents stands after folding: its
// folded form and a mark no text holds, so "sí" never equals "si".
func keptToken(w string) string { return Fold(w) + "\u02b9" }

// fold folds s, keeping the words of keep_accents apart.
func (l *Locale) fold(s string) string {
	if l == nil || (len(l.keepAccents) == 0 && !l.keepFinalAccents) {
		return Fold(s)
	}
	// Only a word with a letter beyond ASCII can be one to keep apart.
	if isASCII(s) {
		return Fold(s)
	}
	if !norm.NFC.IsNormalString(s) {
		s = norm.NFC.String(s)
	}
	var b strings.Builder
	last := 0
	for i := 0; i < len(s); {
		r, sz := utf8.DecodeRuneInString(s[i:])
		if !unicode.IsLetter(r) {
			i += sz
			continue
		}
		j, n, wide, final := i, 0, false, r
		for j < len(s) {
			r2, sz2 := utf8.DecodeRuneInString(s[j:])
			if !unicode.IsLetter(r2) {
				break
			}
			wide = wide || r2 >= utf8.RuneSelf
			final = r2
			n++
			j += sz2
		}
		if wide {
			w := strings.ToLower(s[i:j])
			rep, ok := l.keepAccents[w]
			if !ok && l.keepFinalAccents && n >= 3 && isAccentedVowel(unicode.ToLower(final)) {
				rep, ok = keptToken(w), true
			}
			if ok {
				if b.Len() == 0 {
					b.Grow(len(s) + 8)
				}
				b.WriteString(s[last:i])
				b.WriteString(rep)
				last = j
			}
		}
		i = j
	}
	if last == 0 {
		return Fold(s)
	}
	b.WriteString(s[last:])
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
func (l *Locale) splitWord(w string) []string { return l.appendSplit(nil, w) }

// appendSplit appends w's parts, as splitWord splits them, to dst.
func (l *Locale) appendSplit(dst []string, w string) []string {
	if l != nil {
		for _, e := range l.elisions {
			if len(w) > len(e) && strings.HasPrefix(w, e) {
				return l.appendSplit(append(dst, e), w[len(e):])
			}
		}
		for _, c := range l.clitics {
			if len(w) > len(c.suffix) && strings.HasSuffix(w, c.suffix) {
				return append(l.appendSplit(dst, w[:len(w)-len(c.suffix)]), c.word)
			}
		}
	}
	if strings.IndexByte(w, '-') >= 0 {
		for part := range strings.SplitSeq(w, "-") {
			dst = append(dst, part)
		}
		return dst
	}
	return append(dst, w)
}

// ParseNumber reads a numeric token as a number, using the locale's decimal
// separator: with a decimal comma "1.200,50" is 1200.5; without one
// "1,200.50" is. A separator followed by other than three digits is read as
// the decimal mark whatever the locale ("120,50" is 120.5 in English too).
// A word is read with the locale's number words ("two", "einundzwanzig").
func (l *Locale) ParseNumber(tok string) (float64, bool) {
	if tok == "" || !unicode.IsDigit(rune(tok[0])) {
		if n, ok := l.wordNumber(tok); ok {
			return float64(n), true
		}
		return 0, false
	}
	units, scale, _, ok := parseDecimal(tok, decimalMark(tok, l != nil && l.decimalComma))
	if !ok {
		return 0, false
	}
	// Both exact in a float64, so the quotient is rounded once, as
	// ParseFloat rounds.
	if units < 1<<53 && scale <= 22 {
		return float64(units) / math.Pow10(int(scale)), true
	}
	v, err := strconv.ParseFloat(strconv.FormatInt(units, 10)+"e-"+strconv.Itoa(int(scale)), 64)
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
