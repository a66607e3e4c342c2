package patterns

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
	"golang.org/x/text/unicode/norm"

	"github.com/yesguard/yesguard/locales"
)

// File is a locale file as written (locales/<lang>.yaml). docs/locales.md
// documents each field with examples.
type File struct {
	Lang string `yaml:"lang"`
	Name string `yaml:"name"`
	// MaxPlainWords: a caller turn with more words (fillers not counted)
	// is rambling, not a plain yes.
	MaxPlainWords int `yaml:"max_plain_words"`
	// DecimalComma: "120,50" is 120.5 and "1.200" is 1200.
	DecimalComma bool `yaml:"decimal_comma"`
	// Elisions are split off the word they lead ("j'", "l'").
	Elisions []string `yaml:"elisions"`
	// Clitics are split off the end of the word they follow and read as
	// the word they stand for ("geht's" is "geht" "es").
	Clitics map[string]string `yaml:"clitics"`
	// OrdinalDot: a dot right after a number of one or two digits and
	// before a word marks an ordinal ("am 12. Mai"), not a sentence end.
	OrdinalDot bool `yaml:"ordinal_dot"`
	// Abbreviations: a dot right after one of these words does not end
	// the sentence ("Dr. Patel", "Sra. Ruiz"). Written without the dot.
	Abbreviations []string `yaml:"abbreviations"`
	// KeepAccents lists words whose accents tell them from another word
	// ("sí", yes, from "si", if): they are not folded to the plain word.
	KeepAccents []string `yaml:"keep_accents"`

	// Caller turns.
	Affirmatives   []string `yaml:"affirmatives"`
	NegationIdioms []string `yaml:"negation_idioms"`
	Negations      []string `yaml:"negations"`
	Hedges         []string `yaml:"hedges"`
	Conditions     []string `yaml:"conditions"`
	Additions      []string `yaml:"additions"`
	QuestionWords  []string `yaml:"question_words"`
	Fillers        []string `yaml:"fillers"`
	Politeness     []string `yaml:"politeness"`
	Glue           []string `yaml:"glue"`
	Requests       []string `yaml:"requests"`
	// Particles: words of hedges, conditions or additions that are mere
	// particles after one of the action's verbs (nl "boek het maar").
	Particles     []string `yaml:"particles"`
	QuantityWords []string `yaml:"quantity_words"`

	// Agent turns.
	ConfirmRequests []string `yaml:"confirm_requests"`
	QuestionStarts  []string `yaml:"question_starts"`
	Proceed         []string `yaml:"proceed"`
	ConfirmVerbs    []string `yaml:"confirm_verbs"`
	BackReferences  []string `yaml:"back_references"`
	// OpenQuestions: a question holding one of these asks for a detail or
	// a choice ("when", "which", "or would you rather"), which a yes does
	// not answer.
	OpenQuestions []string `yaml:"open_questions"`
	// SideClauses open a clause beside what a question asks ("bevor ich
	// den Widerspruch einreiche"): the action's words in it do not make
	// the question about the action.
	SideClauses []string `yaml:"side_clauses"`
	// Alternatives offer a choice where more than a negation follows
	// them in a question ("Dienstag oder Mittwoch?", not "..., oder?").
	Alternatives []string `yaml:"alternatives"`
	// GovernBefore: a proceed or confirm phrase also governs an object
	// just before it ("mit dem Widerspruch fortfahren").
	GovernBefore bool `yaml:"govern_before"`
	// Conjunctions open a clause: a separated verb prefix they follow
	// ends its clause ("reiche ihn ein, sobald ...").
	Conjunctions []string `yaml:"conjunctions"`
	// Prepositions open a phrase that may stand between an object and the
	// phrase that governs it from after ("den Termin am Dienstag
	// bestätigen"), with govern_before.
	Prepositions []string `yaml:"prepositions"`

	// Inflection turns a policy's verbs and objects into the forms a
	// model uses.
	Inflection Inflection `yaml:"inflection"`

	// Values: the words amounts, dates and times are read with
	// (values_locale.go). A locale without them reads figures only.
	Values ValuesFile `yaml:"values"`
}

// Inflection describes how words of the language inflect.
type Inflection struct {
	// Strip: endings removed from a word before a suffix is added
	// ("ar" of "enviar"), longest first.
	Strip []string `yaml:"strip"`
	// Suffixes added to the word and to each stripped stem.
	Suffixes []string `yaml:"suffixes"`
	// DoubleFinal: the final consonant doubles before a suffix that
	// starts with a vowel ("submitted").
	DoubleFinal bool `yaml:"double_final"`
	// Irregular forms by word ("send": [sent]).
	Irregular map[string][]string `yaml:"irregular"`
	// SeparablePrefixes split off a verb and stand later in the sentence
	// ("einreichen" as "reiche ... ein").
	SeparablePrefixes []string `yaml:"separable_prefixes"`
	// Infixes stand between a separable prefix and the stem
	// ("ge" in "eingereicht", "zu" in "einzureichen"). An infix written
	// with a space on each side is a word of its own (nl " te ":
	// "in te dienen").
	Infixes []string `yaml:"infixes"`
	// NounSuffixes make nouns of a verb ("ung": "Buchung"): such a noun
	// names what the action acts on, like one of its objects, not the
	// action itself ("die Buchung stornieren").
	NounSuffixes []string `yaml:"noun_suffixes"`
	// Prefixes are put before each form of a verb (not of an object):
	// "ge" gives participles (gebucht, geboekt).
	Prefixes []string `yaml:"prefixes"`
	// StemEndings: a stem that ends in a key also ends in its value
	// ("v": "f" gives nl "leef" of "leven"; "gg": "g" gives "zeg" of
	// "zeggen").
	StemEndings map[string]string `yaml:"stem_endings"`
	// DoubleVowel: a stem ending in one vowel and a consonant also has the
	// vowel doubled, and one ending in a doubled vowel and a consonant
	// also has it single (nl "betal" ↔ "betaal", "afspraak" ↔ "afsprak").
	DoubleVowel bool `yaml:"double_vowel"`
	// Exclude: generated forms that are other, common words and must not
	// match (pt "agenda", a form of "agendar" and the noun "diary").
	Exclude []string `yaml:"exclude"`
}

// Locale is one language's compiled rules. It is immutable.
type Locale struct {
	lang          string
	name          string
	maxPlainWords int
	decimalComma  bool
	ordinalDot    bool
	abbreviations map[string]bool
	keepAccents   map[string]string // NFC lower-case word → its kept token
	elisions      []string
	clitics       []clitic

	affirmatives, negationIdioms, negations, hedges, conditions, additions phraseList
	questionWords, fillers, politeness, glue, requests, quantityWords      phraseList
	confirmRequests, questionStarts, proceed, confirmVerbs, backReferences phraseList
	particles, openQuestions, alternatives, prepositions, conjunctions     phraseList
	sideClauses                                                            phraseList
	governBefore                                                           bool

	values     *valueRules
	inflection Inflection
}

// Lang is the locale's language code ("en").
func (l *Locale) Lang() string { return l.lang }

// Set is the loaded locales, by language. It is immutable and safe for
// concurrent use.
type Set struct {
	byLang  map[string]*Locale
	version string
}

var langFileRE = regexp.MustCompile(`^[a-z]{2,3}$`)

// LoadEmbedded loads the locales built into the binary.
func LoadEmbedded() (*Set, error) { return Load("") }

// Load loads the embedded locales, then every <lang>.yaml in dir over them:
// a file there replaces the embedded one of its language or adds a
// language. An empty dir loads the embedded ones only.
func Load(dir string) (*Set, error) {
	files, err := readFiles(locales.FS, "embedded ")
	if err != nil {
		return nil, err
	}
	if dir != "" {
		over, err := readFiles(os.DirFS(dir), dir+"/")
		if err != nil {
			return nil, err
		}
		for k, v := range over {
			files[k] = v
		}
	}
	return compileSet(files)
}

// LoadFS loads every <lang>.yaml in fsys, and nothing else.
func LoadFS(fsys fs.FS) (*Set, error) {
	files, err := readFiles(fsys, "")
	if err != nil {
		return nil, err
	}
	return compileSet(files)
}

type rawFile struct {
	name string // for messages
	data []byte
}

func readFiles(fsys fs.FS, label string) (map[string]rawFile, error) {
	names, err := fs.Glob(fsys, "*.yaml")
	if err != nil {
		return nil, fmt.Errorf("list locales: %w", err)
	}
	out := map[string]rawFile{}
	for _, n := range names {
		lang := strings.TrimSuffix(path.Base(n), ".yaml")
		if !langFileRE.MatchString(lang) {
			return nil, fmt.Errorf("%s%s: a locale file is named <lang>.yaml with a 2 or 3 letter language code", label, n)
		}
		data, err := fs.ReadFile(fsys, n)
		if err != nil {
			return nil, fmt.Errorf("read locale: %w", err)
		}
		out[lang] = rawFile{name: label + n, data: data}
	}
	return out, nil
}

func compileSet(files map[string]rawFile) (*Set, error) {
	if len(files) == 0 {
		return nil, errors.New("no locale files")
	}
	s := &Set{byLang: map[string]*Locale{}}
	h := sha256.New()
	var errs []error
	for _, lang := range slices.Sorted(maps.Keys(files)) {
		rf := files[lang]
		l, err := ParseLocale(lang, rf.data)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", rf.name, err))
			continue
		}
		s.byLang[lang] = l
		h.Write([]byte(lang))
		h.Write(rf.data)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	s.version = hex.EncodeToString(h.Sum(nil)[:6])
	return s, nil
}

// ParseLocale reads and validates one locale file for lang, reporting every
// problem at once, each naming its key.
func ParseLocale(lang string, data []byte) (*Locale, error) {
	var f File
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("parse: %w", err)
	}
	if err := f.Validate(lang); err != nil {
		return nil, err
	}
	return compileLocale(&f), nil
}

// Validate reports every problem of the file at once.
func (f *File) Validate(lang string) error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	}
	if f.Lang != lang {
		bad("lang", "is %q but the file is named for %q", f.Lang, lang)
	}
	if f.MaxPlainWords <= 0 || f.MaxPlainWords > 50 {
		bad("max_plain_words", "must be 1 to 50, got %d", f.MaxPlainWords)
	}
	required := map[string][]string{
		"affirmatives": f.Affirmatives, "negations": f.Negations,
		"confirm_requests": f.ConfirmRequests, "proceed": f.Proceed,
		"question_words": f.QuestionWords, "conditions": f.Conditions,
		"hedges": f.Hedges, "back_references": f.BackReferences,
	}
	for _, key := range slices.Sorted(maps.Keys(required)) {
		if len(required[key]) == 0 {
			bad(key, "must list at least one phrase")
		}
	}
	lists := map[string][]string{
		"affirmatives": f.Affirmatives, "negation_idioms": f.NegationIdioms, "negations": f.Negations,
		"hedges": f.Hedges, "conditions": f.Conditions, "additions": f.Additions,
		"question_words": f.QuestionWords, "fillers": f.Fillers, "politeness": f.Politeness,
		"glue": f.Glue, "requests": f.Requests, "quantity_words": f.QuantityWords,
		"confirm_requests": f.ConfirmRequests, "question_starts": f.QuestionStarts,
		"proceed": f.Proceed, "confirm_verbs": f.ConfirmVerbs, "back_references": f.BackReferences,
		"elisions": f.Elisions, "inflection.strip": f.Inflection.Strip,
		"abbreviations": f.Abbreviations, "keep_accents": f.KeepAccents, "inflection.exclude": f.Inflection.Exclude,
		"particles": f.Particles, "open_questions": f.OpenQuestions, "prepositions": f.Prepositions,
		"conjunctions":                  f.Conjunctions,
		"inflection.suffixes":           f.Inflection.Suffixes,
		"inflection.separable_prefixes": f.Inflection.SeparablePrefixes,
		"inflection.infixes":            f.Inflection.Infixes,
		"inflection.prefixes":           f.Inflection.Prefixes,
		"inflection.noun_suffixes":      f.Inflection.NounSuffixes,
	}
	for _, key := range slices.Sorted(maps.Keys(lists)) {
		seen := map[string]int{}
		for i, p := range lists[key] {
			fp := strings.Join(strings.Fields(Fold(p)), " ")
			switch {
			case fp == "" && key != "inflection.suffixes":
				bad(fmt.Sprintf("%s[%d]", key, i), "empty phrase")
			case strings.HasPrefix(fp, "* ") || strings.HasSuffix(fp, " *") || fp == "*":
				bad(fmt.Sprintf("%s[%d]", key, i), "%q: a phrase may not start or end with *", p)
			}
			if j, dup := seen[fp]; dup {
				bad(fmt.Sprintf("%s[%d]", key, i), "%q repeats %s[%d]", p, key, j)
			}
			seen[fp] = i
		}
	}
	f.Values.validate(bad)
	for _, c := range slices.Sorted(maps.Keys(f.Clitics)) {
		fc := Fold(strings.TrimSpace(c))
		if len(fc) < 2 || fc[0] != '\'' || strings.ContainsAny(fc[1:], "' ") {
			bad("clitics", "%q: a clitic is an apostrophe and letters (\"'s\")", c)
		}
		if w := strings.TrimSpace(f.Clitics[c]); w == "" || strings.ContainsRune(w, ' ') {
			bad("clitics", "%q: stands for one word, got %q", c, f.Clitics[c])
		}
	}
	for _, e := range slices.Sorted(maps.Keys(f.Inflection.StemEndings)) {
		if strings.TrimSpace(e) == "" {
			bad("inflection.stem_endings", "empty ending")
		}
	}
	return errors.Join(errs...)
}

func compileLocale(f *File) *Locale {
	l := &Locale{
		lang:          f.Lang,
		name:          f.Name,
		maxPlainWords: f.MaxPlainWords,
		decimalComma:  f.DecimalComma,
		inflection:    f.Inflection,
	}
	for _, e := range f.Elisions {
		l.elisions = append(l.elisions, Fold(strings.TrimSpace(e)))
	}
	l.ordinalDot = f.OrdinalDot
	l.abbreviations = map[string]bool{}
	for _, a := range f.Abbreviations {
		l.abbreviations[Fold(strings.TrimSuffix(strings.TrimSpace(a), "."))] = true
	}
	l.keepAccents = map[string]string{}
	for _, w := range f.KeepAccents {
		w = strings.ToLower(norm.NFC.String(strings.TrimSpace(w)))
		l.keepAccents[w] = keptToken(w)
	}
	for _, c := range slices.Sorted(maps.Keys(f.Clitics)) {
		l.clitics = append(l.clitics, clitic{suffix: Fold(strings.TrimSpace(c)), word: Fold(strings.TrimSpace(f.Clitics[c]))})
	}
	// Longest clitic first.
	sort.SliceStable(l.clitics, func(i, j int) bool { return len(l.clitics[i].suffix) > len(l.clitics[j].suffix) })
	// Longest elision first, so "qu'" wins over a shorter one.
	sort.Slice(l.elisions, func(i, j int) bool { return len(l.elisions[i]) > len(l.elisions[j]) })
	c := func(srcs []string) phraseList { return compileList(l, srcs) }
	l.affirmatives = c(f.Affirmatives)
	l.negationIdioms = c(f.NegationIdioms)
	l.negations = c(f.Negations)
	l.hedges = c(f.Hedges)
	l.conditions = c(f.Conditions)
	l.additions = c(f.Additions)
	l.questionWords = c(f.QuestionWords)
	l.fillers = c(f.Fillers)
	l.politeness = c(f.Politeness)
	l.glue = c(f.Glue)
	l.requests = c(f.Requests)
	l.quantityWords = c(f.QuantityWords)
	l.confirmRequests = c(f.ConfirmRequests)
	l.questionStarts = c(f.QuestionStarts)
	l.proceed = c(f.Proceed)
	l.confirmVerbs = c(f.ConfirmVerbs)
	l.backReferences = c(f.BackReferences)
	l.particles = c(f.Particles)
	l.openQuestions = c(f.OpenQuestions)
	l.alternatives = c(f.Alternatives)
	l.sideClauses = c(f.SideClauses)
	l.prepositions = c(f.Prepositions)
	l.conjunctions = c(f.Conjunctions)
	l.governBefore = f.GovernBefore
	l.values = compileValues(l, &f.Values)
	return l
}

// Get returns the locale for a BCP-47 tag: "es-MX" falls back to "es". It
// returns nil when no locale covers the language.
func (s *Set) Get(tag string) *Locale {
	tag = strings.ToLower(strings.TrimSpace(tag))
	if l, ok := s.byLang[tag]; ok {
		return l
	}
	if i := strings.IndexAny(tag, "-_"); i > 0 {
		return s.byLang[tag[:i]]
	}
	return nil
}

// Version identifies the loaded locales' bytes.
func (s *Set) Version() string { return s.version }

// Langs lists the loaded languages, sorted.
func (s *Set) Langs() []string { return slices.Sorted(maps.Keys(s.byLang)) }
