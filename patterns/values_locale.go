package patterns

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// ValuesFile is the values block of a locale file: the words Locale.Values
// reads amounts, dates and times with. docs/locales.md ("Values")
// documents each key. Every list is data: the reader's Go holds no word
// of any language.
type ValuesFile struct {
	Numbers  NumbersFile  `yaml:"numbers"`
	Ordinals OrdinalsFile `yaml:"ordinals"`
	// Currencies: ISO code → the words, codes and symbols that name it
	// ("USD": [dollar, dollars, usd, "$"]). A symbol is written as it is
	// printed ("$", "€", "r$").
	Currencies map[string][]string `yaml:"currencies"`
	// MinorUnits name a hundredth of the currency ("cents", "céntimos").
	MinorUnits []string `yaml:"minor_units"`
	// Months and Weekdays: name or abbreviation → 1-12 and 1 (Monday) to
	// 7. An abbreviation written with its dot ("dec.") is also an
	// abbreviation for the tokeniser: the dot does not end the sentence.
	Months   map[string]int `yaml:"months"`
	Weekdays map[string]int `yaml:"weekdays"`
	// DateOrder: how a numeric date without a four-digit year first is
	// read: "dmy" (08/12 is 8 December), "mdy" (12/08 is December 8),
	// or both, when the locale's speakers use both: then a date whose
	// two readings differ is unsure and never matches an argument.
	DateOrder []string `yaml:"date_order"`
	// DayPrefixes make the cardinal after them a day of the month
	// ("el 8", "le huit", "dia 8"); OrdinalPrefixes do so for an ordinal
	// only ("the 8th", "am achten", "op de achtste").
	DayPrefixes     []string `yaml:"day_prefixes"`
	OrdinalPrefixes []string `yaml:"ordinal_prefixes"`
	// DateGlue may stand between the parts of one date ("of", "de").
	DateGlue []string `yaml:"date_glue"`
	// MonthPrefixes make a month alone a date ("in December"); without
	// one a month name with no day is none ("May I ...").
	MonthPrefixes []string `yaml:"month_prefixes"`
	// Relative dates need the call's own date to be checked ("today",
	// "mañana"): they are read as values that match no argument.
	Relative []string `yaml:"relative"`
	// TimePrefixes make the hour after them a time ("at 3", "a las
	// tres", "um 15"); WeakTimePrefixes only with more evidence: an hour
	// mark, minutes or a part of the day ("à 15h", "las 3 de la tarde").
	TimePrefixes     []string `yaml:"time_prefixes"`
	WeakTimePrefixes []string `yaml:"weak_time_prefixes"`
	// HourMarks after an hour make it a time ("o'clock", "Uhr", "h");
	// WeakHourMarks only after a time prefix ("à 3 heures", not "dans
	// 3 heures").
	HourMarks     []string `yaml:"hour_marks"`
	WeakHourMarks []string `yaml:"weak_hour_marks"`
	// HourWords are an hour only after a time prefix (es "la una").
	HourWords map[string]int `yaml:"hour_words"`
	// MinuteConnectors join minutes to the hour ("las tres y veinte").
	MinuteConnectors []string `yaml:"minute_connectors"`
	// Periods: a part of the day → the hours [from, to) it covers, which
	// reads a twelve-hour hour ("pm": [12, 24], "in the afternoon": [12,
	// 18], "at night": [19, 28]: 28 is 4 the next morning).
	Periods map[string][2]int `yaml:"periods"`
	// NamedTimes: a time by name → minutes since midnight ("noon": 720).
	NamedTimes map[string]int `yaml:"named_times"`
	// ClockPhrases: a phrase with an hour slot {h} and maybe a minutes slot
	// ({m} added, {-m} taken away) → minutes added to the hour ("half past
	// {h}": 30, "halb {h}": -30, "{-m} to {h}": 0). They are a time on
	// their own; CuedClockPhrases only with a time prefix, an hour mark or
	// a part of the day ("a las {h} menos {-m}").
	ClockPhrases     map[string]int `yaml:"clock_phrases"`
	CuedClockPhrases map[string]int `yaml:"cued_clock_phrases"`
	// NotValues hold value words and state no value ("this one", "guten
	// Morgen", "in a second").
	NotValues []string `yaml:"not_values"`
}

// NumbersFile holds the cardinal numbers.
type NumbersFile struct {
	// Words: a number word (or a phrase of words, fr "quatre vingt") →
	// its value, added to the number being read.
	Words map[string]int `yaml:"words"`
	// Slots: what may follow a word, when not what its value implies: the
	// next part must be smaller than the slot (fr "soixante": 20, so
	// "soixante-dix" is 70; "dix": 10, so "dix-sept" is 17). Implied: 100
	// after a multiple of 100, 10 after a multiple of 10, nothing after a
	// unit or a teen.
	Slots map[string]int `yaml:"slots"`
	// Multipliers multiply what stands before them, or 1 ("hundred",
	// "mil", "tausend").
	Multipliers map[string]int `yaml:"multipliers"`
	// Articles are 1 only before a multiplier or a currency ("a hundred",
	// "un euro"); alone they are articles, not numbers.
	Articles []string `yaml:"articles"`
	// Connectors may join the parts of a number ("one hundred and
	// twenty", "treinta y uno", "cento e vinte").
	Connectors []string `yaml:"connectors"`
	// UnitBeforeTens: a unit, a connector and the tens make one number
	// (de "einundzwanzig", nl "eenentwintig").
	UnitBeforeTens bool `yaml:"unit_before_tens"`
	// Compounds: number words are written as one word
	// ("einhundertzwanzig", "centoventi"); Parts are the pieces such a
	// word is made of besides the words (it "vent" of "ventuno").
	Compounds bool           `yaml:"compounds"`
	Parts     map[string]int `yaml:"parts"`
	// Digits are read as a digit only digit by digit or as minutes ("three
	// oh five").
	Digits map[string]int `yaml:"digits"`
	// DecimalWords: the decimal point said ("point", "coma").
	DecimalWords []string `yaml:"decimal_words"`
	// MinorConnectors join a whole amount and its hundredths (es "ciento
	// veinte con cincuenta").
	MinorConnectors []string `yaml:"minor_connectors"`
	// MillionGlue stands between millions and their currency (es "un
	// millón de euros", fr "deux millions d'euros").
	MillionGlue []string `yaml:"million_glue"`
}

// OrdinalsFile holds the ordinal numbers.
type OrdinalsFile struct {
	// Words: ordinal words and stems → their value ("first": 1).
	Words map[string]int `yaml:"words"`
	// Suffixes make an ordinal of a cardinal ("four" + "th"); Endings
	// may follow a suffix or an ordinal stem (de "vier" + "t" + "en").
	Suffixes []string `yaml:"suffixes"`
	Endings  []string `yaml:"endings"`
	// FigureSuffixes follow a figure ("8th", "1er", "8º").
	FigureSuffixes []string `yaml:"figure_suffixes"`
}

// validate reports the values block's problems through bad.
func (v *ValuesFile) validate(bad func(key, format string, args ...any)) {
	word := func(key, w string) {
		if strings.TrimSpace(Fold(w)) == "" {
			bad(key, "empty word")
		}
	}
	positive := func(key string, m map[string]int, lo, hi int) {
		for _, w := range slices.Sorted(maps.Keys(m)) {
			word(key, w)
			if m[w] < lo || m[w] > hi {
				bad(key, "%q: %d is not in %d..%d", w, m[w], lo, hi)
			}
		}
	}
	n := &v.Numbers
	positive("values.numbers.words", n.Words, 0, 999)
	positive("values.numbers.slots", n.Slots, 1, 1000)
	positive("values.numbers.parts", n.Parts, 0, 1000000)
	positive("values.numbers.digits", n.Digits, 0, 9)
	for _, w := range slices.Sorted(maps.Keys(n.Multipliers)) {
		word("values.numbers.multipliers", w)
		switch n.Multipliers[w] {
		case 100, 1000, 1000000:
		default:
			bad("values.numbers.multipliers", "%q: a multiplier is 100, 1000 or 1000000, got %d", w, n.Multipliers[w])
		}
	}
	for _, w := range slices.Sorted(maps.Keys(n.Slots)) {
		if _, ok := n.Words[w]; !ok {
			bad("values.numbers.slots", "%q is not in values.numbers.words", w)
		}
	}
	positive("values.ordinals.words", v.Ordinals.Words, 1, 99)
	positive("values.months", v.Months, 1, 12)
	positive("values.weekdays", v.Weekdays, 1, 7)
	positive("values.hour_words", v.HourWords, 0, 24)
	positive("values.named_times", v.NamedTimes, 0, 24*60-1)
	for _, c := range slices.Sorted(maps.Keys(v.Currencies)) {
		if len(c) != 3 || strings.ToUpper(c) != c {
			bad("values.currencies", "%q: a currency is its ISO 4217 code (USD)", c)
		}
		if len(v.Currencies[c]) == 0 {
			bad("values.currencies."+c, "must list at least one word or symbol")
		}
		for i, w := range v.Currencies[c] {
			word(fmt.Sprintf("values.currencies.%s[%d]", c, i), w)
		}
	}
	if len(v.DateOrder) == 0 && (len(v.Months) > 0 || len(n.Words) > 0) {
		bad("values.date_order", "must be dmy, mdy or both")
	}
	for i, o := range v.DateOrder {
		if o != "dmy" && o != "mdy" {
			bad(fmt.Sprintf("values.date_order[%d]", i), "%q: must be dmy or mdy", o)
		}
	}
	for _, p := range slices.Sorted(maps.Keys(v.Periods)) {
		word("values.periods", p)
		if r := v.Periods[p]; r[0] < 0 || r[1] <= r[0] || r[1] > 48 || r[1]-r[0] > 24 {
			bad("values.periods", "%q: [%d, %d] is not a range of hours", p, r[0], r[1])
		}
	}
	for key, m := range map[string]map[string]int{"values.clock_phrases": v.ClockPhrases, "values.cued_clock_phrases": v.CuedClockPhrases} {
		for _, p := range slices.Sorted(maps.Keys(m)) {
			if _, err := parseClockPhrase(p); err != nil {
				bad(key, "%q: %v", p, err)
			}
			if m[p] < -60 || m[p] > 60 {
				bad(key, "%q: %d minutes is not in -60..60", p, m[p])
			}
		}
	}
	lists := map[string][]string{
		"values.numbers.articles": n.Articles, "values.numbers.connectors": n.Connectors,
		"values.numbers.decimal_words": n.DecimalWords, "values.numbers.minor_connectors": n.MinorConnectors,
		"values.numbers.million_glue": n.MillionGlue,
		"values.ordinals.suffixes":    v.Ordinals.Suffixes, "values.ordinals.endings": v.Ordinals.Endings,
		"values.ordinals.figure_suffixes": v.Ordinals.FigureSuffixes, "values.minor_units": v.MinorUnits,
		"values.day_prefixes": v.DayPrefixes, "values.ordinal_prefixes": v.OrdinalPrefixes,
		"values.date_glue": v.DateGlue, "values.month_prefixes": v.MonthPrefixes, "values.relative": v.Relative, "values.time_prefixes": v.TimePrefixes,
		"values.weak_time_prefixes": v.WeakTimePrefixes, "values.hour_marks": v.HourMarks,
		"values.weak_hour_marks": v.WeakHourMarks, "values.minute_connectors": v.MinuteConnectors,
		"values.not_values": v.NotValues,
	}
	for _, key := range slices.Sorted(maps.Keys(lists)) {
		seen := map[string]int{}
		for i, w := range lists[key] {
			f := strings.Join(strings.Fields(Fold(w)), " ")
			if f == "" {
				bad(fmt.Sprintf("%s[%d]", key, i), "empty phrase")
			}
			if j, dup := seen[f]; dup {
				bad(fmt.Sprintf("%s[%d]", key, i), "%q repeats %s[%d]", w, key, j)
			}
			seen[f] = i
		}
	}
}

// vflag marks what a word can be in a value.
type vflag uint16

const (
	fArticle     vflag = 1 << iota // 1 before a multiplier or a currency
	fConnector                     // joins the parts of a number
	fDecimal                       // the decimal point said
	fMinorConn                     // joins an amount and its hundredths
	fMinorUnit                     // a hundredth of the currency
	fMinuteConn                    // joins minutes to the hour
	fNumPhrase                     // opens a number of several words ("quatre vingt")
	fNamed                         // opens a named time ("noon", "meio-dia")
	fWeekday                       // opens a weekday of several words
	fRelative                      // opens a relative date
	fClock                         // opens a clock phrase ("half past {h}")
	fPrefixEnd                     // ends a time prefix ("las" of "a las")
	fMillionGlue                   // between millions and their currency
)

// fStarts are the flags that let a word open a value on its own.
const fStarts = fNumPhrase | fNamed | fWeekday | fRelative | fClock

// lexWord is what one folded word can be in a value: the compiled values
// block, one map read a word.
type lexWord struct {
	num     int32 // cardinal value + 1; 0: not a cardinal
	slot    int32 // what may follow it (see NumbersFile.Slots); 0: implied
	mult    int32 // multiplier; 0: none
	part    int32 // compound part value + 1 (NumbersFile.Parts)
	ord     int8  // ordinal value; 0: none
	digit   int8  // digit word value + 1
	month   int8
	weekday int8
	hour    int8 // hour word value + 1
	flags   vflag
	cur     string // currency code, "" when the word names none
}

// anyCurrency marks a lexicon word that names a currency of unknown code.
const anyCurrency = "*"

// valuedList is a phrase list whose phrases each carry a number.
type valuedList struct {
	phraseList
	val map[*phrase]int
}

func (v *valuedList) add(l *Locale, src string, val int) {
	p := compilePhrase(l, src)
	if len(p.elems) == 0 {
		return
	}
	v.phraseList.add(p)
	if v.val == nil {
		v.val = map[*phrase]int{}
	}
	v.val[p] = val
}

// clockPhrase is a compiled clock phrase: words and slots.
type clockPhrase struct {
	src   string
	elems []clockElem
	add   int  // minutes added to the hour
	cued  bool // a time only with a prefix, an hour mark or a period
}

// clockElem is a word of a clock phrase, or a slot: 'h' the hour, 'm'
// minutes added, '-' minutes taken away.
type clockElem struct {
	word string
	slot byte
}

// parseClockPhrase splits a clock phrase into words and slots; it must
// hold {h} once and at most one of {m} and {-m}.
func parseClockPhrase(src string) ([]clockElem, error) {
	var out []clockElem
	var h, m int
	for _, w := range strings.Fields(src) {
		switch w {
		case "{h}":
			h++
			out = append(out, clockElem{slot: 'h'})
		case "{m}", "{-m}":
			m++
			out = append(out, clockElem{slot: w[1]})
		default:
			if strings.ContainsAny(w, "{}") {
				return nil, fmt.Errorf("%q: a slot is {h}, {m} or {-m}", w)
			}
			out = append(out, clockElem{word: w})
		}
	}
	if h != 1 || m > 1 {
		return nil, fmt.Errorf("a clock phrase holds {h} once and at most one minutes slot")
	}
	return out, nil
}

// valueRules is a locale's compiled values block. It is immutable.
type valueRules struct {
	lex map[string]lexWord
	// filter: lexBit of every word in lex, so most tokens cost no map
	// read; morph: the first two letters of every number word and part,
	// for the words a compound or an ordinal suffix makes.
	filter [lexBits / 64]uint64
	// phraseWords: lexBit of every word of not_values and periods, so
	// that asking whether one holds a word costs a bit test.
	phraseWords [lexBits / 64]uint64
	morph       [11]uint64
	maxMorph    int

	numPhrases, periods, named valuedList
	weekdayPhrases             valuedList
	relative, notValues        phraseList
	timePrefixes, weakPrefixes endList
	hourMarks, weakMarks       phraseList
	dayPrefixes, ordPrefixes   endList
	dateGlue, monthPrefixes    endList
	// dateJoin: what may stand between a date's parts: its glue and
	// its day and ordinal prefixes ("Tuesday, *the* 8th").
	dateJoin phraseList

	clockByWord map[string][]*clockPhrase
	clockBySlot []*clockPhrase

	symbols     map[string]string // folded symbol → currency code
	ordSuffixes []string          // longest first
	ordEndings  []string          // longest first, with ""
	figSuffixes map[string]bool
	dmy, mdy    bool
	unitTens    bool
	compounds   bool
}

// morphBit is the bit of a word's first two bytes in valueRules.morph,
// or -1 for a word that does not start with two letters a-z.
func morphBit(w string) int {
	if len(w) < 2 || w[0] < 'a' || w[0] > 'z' || w[1] < 'a' || w[1] > 'z' {
		return -1
	}
	return int(w[0]-'a')*26 + int(w[1]-'a')
}

// set applies f to the lexicon entry of the single word w; a phrase of
// several words is left to the caller.
func (r *valueRules) set(l *Locale, w string, f func(e *lexWord)) bool {
	parts := l.splitWord(strings.TrimSpace(l.fold(w)))
	if len(parts) != 1 || strings.ContainsRune(parts[0], ' ') {
		return false
	}
	k := parts[0]
	e := r.lex[k]
	f(&e)
	r.lex[k] = e
	return true
}

// startPhrase flags the first word of each phrase of pl with f.
func (r *valueRules) startPhrase(pl *phraseList, f vflag) {
	for w := range pl.byFirst {
		e := r.lex[w]
		e.flags |= f
		r.lex[w] = e
	}
}

// endList is a phrase list looked for before a word (a time prefix
// before an hour): its longest phrase, and a filter of its phrases' last
// words, so that looking back for one mostly costs a bit test.
type endList struct {
	phraseList
	maxLen int
	last   [lexBits / 64]uint64
}

func newEndList(l *Locale, srcs []string) endList {
	el := endList{phraseList: compileList(l, srcs)}
	for _, ps := range el.byFirst {
		for _, p := range ps {
			el.maxLen = max(el.maxLen, len(p.p.elems))
			if last := p.p.elems[len(p.p.elems)-1]; last.word != "" {
				bit := lexBit(last.word)
				el.last[bit>>6] |= 1 << (bit & 63)
			}
		}
	}
	return el
}

// lexBits is the size of valueRules.filter.
const lexBits = 1024

// lexBit hashes a word to its bit in valueRules.filter: its first two
// bytes, its last byte and its length.
func lexBit(w string) uint {
	h := uint(w[0])*131 + uint(w[len(w)-1])*31 + uint(len(w))*7919
	if len(w) > 1 {
		h += uint(w[1]) * 17
	}
	return (h * 2654435761 >> 7) % lexBits
}

func compileValues(l *Locale, v *ValuesFile) *valueRules {
	r := &valueRules{lex: map[string]lexWord{}, symbols: map[string]string{}, figSuffixes: map[string]bool{}, clockByWord: map[string][]*clockPhrase{}}
	n := &v.Numbers
	morph := func(w string) {
		if b := morphBit(w); b >= 0 {
			r.morph[b>>6] |= 1 << (b & 63)
		}
		r.maxMorph = max(r.maxMorph, len(w))
	}
	for w, val := range n.Words {
		slot := n.Slots[w]
		if !r.set(l, w, func(e *lexWord) { e.num, e.slot = int32(val)+1, int32(slot) }) {
			r.numPhrases.add(l, w, val|slot<<16)
		}
		morph(Fold(w))
	}
	for w, val := range n.Multipliers {
		r.set(l, w, func(e *lexWord) { e.mult = int32(val) })
		morph(Fold(w))
	}
	for w, val := range n.Parts {
		r.set(l, w, func(e *lexWord) { e.part = int32(val) + 1 })
		morph(Fold(w))
	}
	for w, val := range n.Digits {
		r.set(l, w, func(e *lexWord) { e.digit = int8(val) + 1 })
	}
	flag := func(ws []string, f vflag) {
		for _, w := range ws {
			r.set(l, w, func(e *lexWord) { e.flags |= f })
		}
	}
	flag(n.Articles, fArticle)
	flag(n.Connectors, fConnector)
	flag(n.DecimalWords, fDecimal)
	flag(n.MinorConnectors, fMinorConn)
	flag(n.MillionGlue, fMillionGlue)
	flag(v.MinorUnits, fMinorUnit)
	flag(v.MinuteConnectors, fMinuteConn)
	for _, c := range n.Connectors {
		morph(Fold(c))
	}
	for w, val := range v.Ordinals.Words {
		r.set(l, w, func(e *lexWord) { e.ord = int8(val) })
		morph(Fold(w))
	}
	for _, s := range v.Ordinals.Suffixes {
		r.ordSuffixes = append(r.ordSuffixes, Fold(s))
	}
	r.ordEndings = append(r.ordEndings, "")
	for _, s := range v.Ordinals.Endings {
		r.ordEndings = append(r.ordEndings, Fold(s))
	}
	byLen := func(a, b string) int { return len(b) - len(a) }
	slices.SortStableFunc(r.ordSuffixes, byLen)
	slices.SortStableFunc(r.ordEndings, byLen)
	for _, s := range v.Ordinals.FigureSuffixes {
		r.figSuffixes[Fold(s)] = true
	}
	// A word or sign listed for two currencies names neither: it is a
	// currency, of unknown code (es "pesos", "$").
	for _, code := range slices.Sorted(maps.Keys(v.Currencies)) {
		for _, w := range v.Currencies[code] {
			fw := Fold(strings.TrimSpace(w))
			if strings.ContainsFunc(fw, func(c rune) bool { return !isWordRune(c) }) {
				if old, dup := r.symbols[fw]; dup && old != code {
					code = ""
				}
				r.symbols[fw] = code
				continue
			}
			r.set(l, w, func(e *lexWord) {
				if e.cur != "" && e.cur != code {
					e.cur = anyCurrency
				} else {
					e.cur = code
				}
			})
		}
	}
	abbrev := func(w string) {
		if strings.HasSuffix(w, ".") {
			l.abbreviations[Fold(strings.TrimSuffix(w, "."))] = true
		}
	}
	for w, m := range v.Months {
		r.set(l, strings.TrimSuffix(w, "."), func(e *lexWord) { e.month = int8(m) })
		abbrev(w)
	}
	for w, d := range v.Weekdays {
		if !r.set(l, strings.TrimSuffix(w, "."), func(e *lexWord) { e.weekday = int8(d) }) {
			// A weekday of two words (pt "segunda-feira"), whose first word
			// alone is another ("segunda", second).
			r.weekdayPhrases.add(l, w, d)
		}
		abbrev(w)
	}
	for w, h := range v.HourWords {
		r.set(l, w, func(e *lexWord) { e.hour = int8(h) + 1 })
	}
	for _, o := range v.DateOrder {
		r.dmy = r.dmy || o == "dmy"
		r.mdy = r.mdy || o == "mdy"
	}
	r.unitTens, r.compounds = n.UnitBeforeTens, n.Compounds
	for p, rg := range v.Periods {
		r.periods.add(l, p, rg[0]<<8|rg[1])
	}
	for p, m := range v.NamedTimes {
		r.named.add(l, p, m)
	}
	c := func(srcs []string) phraseList { return compileList(l, srcs) }
	r.relative = c(v.Relative)
	r.notValues = c(v.NotValues)
	r.timePrefixes = newEndList(l, v.TimePrefixes)
	r.weakPrefixes = newEndList(l, v.WeakTimePrefixes)
	r.hourMarks = c(v.HourMarks)
	r.weakMarks = c(v.WeakHourMarks)
	r.dayPrefixes = newEndList(l, v.DayPrefixes)
	r.ordPrefixes = newEndList(l, v.OrdinalPrefixes)
	r.dateGlue = newEndList(l, v.DateGlue)
	r.monthPrefixes = newEndList(l, v.MonthPrefixes)
	r.dateJoin = c(slices.Concat(v.DateGlue, v.DayPrefixes, v.OrdinalPrefixes))
	r.startPhrase(&r.numPhrases.phraseList, fNumPhrase)
	r.startPhrase(&r.named.phraseList, fNamed)
	r.startPhrase(&r.weekdayPhrases.phraseList, fWeekday)
	r.startPhrase(&r.relative, fRelative)
	// An hour word ("una") is a time only after a time prefix: the last
	// words of the prefixes tell where to look.
	for _, pl := range []*phraseList{&r.timePrefixes.phraseList, &r.weakPrefixes.phraseList} {
		for _, ps := range pl.byFirst {
			for _, p := range ps {
				if last := p.p.elems[len(p.p.elems)-1]; !last.prefix && last.forms == nil {
					r.set(l, last.word, func(e *lexWord) { e.flags |= fPrefixEnd })
				}
			}
		}
	}
	for cued, m := range []map[string]int{v.ClockPhrases, v.CuedClockPhrases} {
		for _, src := range slices.Sorted(maps.Keys(m)) {
			elems, err := parseClockPhrase(src)
			if err != nil {
				continue // Validate reported it
			}
			cp := &clockPhrase{src: src, add: m[src], cued: cued == 1}
			for _, e := range elems {
				if e.slot != 0 {
					cp.elems = append(cp.elems, e)
					continue
				}
				for _, part := range l.splitWord(l.fold(e.word)) {
					cp.elems = append(cp.elems, clockElem{word: part})
				}
			}
			if first := cp.elems[0]; first.slot == 0 {
				r.clockByWord[first.word] = append(r.clockByWord[first.word], cp)
				r.set(l, first.word, func(e *lexWord) { e.flags |= fClock })
			} else {
				r.clockBySlot = append(r.clockBySlot, cp)
			}
		}
	}
	// Longer clock phrases first, so "quarter to {h}" is tried before a
	// shorter phrase that starts the same way.
	for _, ps := range r.clockByWord {
		slices.SortStableFunc(ps, func(a, b *clockPhrase) int { return len(b.elems) - len(a.elems) })
	}
	slices.SortStableFunc(r.clockBySlot, func(a, b *clockPhrase) int { return len(b.elems) - len(a.elems) })
	for w := range r.lex {
		if w != "" {
			bit := lexBit(w)
			r.filter[bit>>6] |= 1 << (bit & 63)
		}
	}
	for _, pl := range []*phraseList{&r.notValues, &r.periods.phraseList} {
		for _, ps := range pl.byFirst {
			for _, p := range ps {
				for _, e := range p.p.elems {
					if e.word != "" {
						bit := lexBit(e.word)
						r.phraseWords[bit>>6] |= 1 << (bit & 63)
					}
				}
			}
		}
	}

	return r
}
