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
	// KeepFinalAccents: a word of three letters or more whose last letter
	// is an accented vowel is not folded into the plain word: es
	// "presentó" (did submit) is not "presento" (I submit), it "inviò"
	// not "invio". Lists must then write such words with their accent.
	KeepFinalAccents bool `yaml:"keep_final_accents"`
	// VerbSecond: the finite verb stands second in a statement (de, nl):
	// "Dat zal ik nu indienen" states, so a run-on sentence is split at a
	// question opener only after a clause of its own (a word of
	// statement_words or recaps before it).
	VerbSecond bool `yaml:"verb_second"`
	// CompoundObjects: a word ending in one of a tool's objects names
	// that object ("Zahnarzttermin", "tandartsafspraak").
	CompoundObjects bool `yaml:"compound_objects"`
	// VerbFirstAsks: a question that opens with the action's verb, only
	// plain words before it, asks leave (es "¿Le envío la apelación?",
	// it "Le invio il ricorso?").
	VerbFirstAsks bool `yaml:"verb_first_asks"`

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

	// The plain question (rule 5). Every word of the sentence a yes
	// answers must be explained: by a frame, a tag, the action's verb,
	// objects and values, a proceed or confirm phrase, a back reference,
	// a plain word, or a name after a title.
	//
	// Frames ask the caller's leave for the agent to act, or offer to
	// ("shall I", "do you want me to", "I can"); the action's verb must
	// follow one, or be followed by a tag.
	Frames []string `yaml:"frames"`
	// Tags confirm a proposal after it ("okay?", "is that right", "if
	// that's alright with you").
	Tags []string `yaml:"tags"`
	// PlainWords are harmless in a question: determiners, the words of
	// now, politeness, address, lead-ins, prepositions.
	PlainWords []string `yaml:"plain_words"`
	// StatementWords are harmless in the sentence a question points back
	// to, besides the plain words: the small words of a statement ("your
	// balance *is* $120.50", "the appeal is *ready*").
	StatementWords []string `yaml:"statement_words"`
	// ModifierLinks join a noun to another that describes it ("la
	// factura *de* la luz"): up to two content words joined so after one
	// of the objects describe it; before one only where no verb governs
	// them (what the verb acts on must be one of its objects).
	ModifierLinks []string `yaml:"modifier_links"`
	// Containers are nouns of a thing made of or about what an action acts
	// on, not that thing: a copy, a receipt, a confirmation of it ("a copy
	// of the claim", "die Eingangsbestätigung"). One never fills a slot, so
	// with a tool's verb it stays unexplained unless the tool lists it as
	// its own object (an email_copy tool's "copy").
	Containers []string `yaml:"containers"`
	// NotModifiers never fill a modifier or party slot: the words of
	// time, order, addition and agency that change what a question
	// proposes ("later", "tomorrow", "first", "also", "yourself").
	NotModifiers []string `yaml:"not_modifiers"`
	// Operators are the closed classes of words that keep a question from
	// proposing this action now, by class (OperatorClasses): one anywhere
	// in the sentence a yes answers, or after it in the turn, refuses,
	// unless a harmless phrase or an explaining list takes its words.
	// negations, hedges, conditions, additions, alternatives,
	// side_clauses and not_modifiers refuse the same way.
	Operators map[string][]string `yaml:"operators"`
	// Harmless phrases hold an operator's words and leave the proposal as
	// it is ("if you'd like", "wenn Sie möchten", "se vuole").
	Harmless []string `yaml:"harmless"`
	// FreePrepositions open a free phrase after the action's slot: who,
	// where, for whom, with what ("to Maria Lopez", "for four people",
	// "bei Frau Dr. Kaya"). Its words are free; its values are compared.
	FreePrepositions []string `yaml:"free_prepositions"`
	// ListConjunctions join items ("two margheritas and a salad"): one
	// followed by a determiner, a number or a title joins; followed by
	// anything else, or opening the sentence, it opens a second clause,
	// and refuses.
	ListConjunctions []string `yaml:"list_conjunctions"`
	// WeakConjunctions are list conjunctions that folding makes one with
	// another word (it, pt "e" and "è", "é"): one opens a clause only
	// before a word with one of InfinitiveEndings ("e stamparlo").
	WeakConjunctions  []string `yaml:"weak_conjunctions"`
	InfinitiveEndings []string `yaml:"infinitive_endings"`
	// NameParticles stand inside a name after a title ("Maria *de*
	// Vries", "Tomás *dos* Santos"), before a capitalised word.
	NameParticles []string `yaml:"name_particles"`
	// MindFrames ask whether the caller minds ("would you mind if I"): a
	// yes to one says they do, and only a no that says go ahead
	// (MindConsents: "not at all", "go ahead") consents.
	MindFrames   []string `yaml:"mind_frames"`
	MindConsents []string `yaml:"mind_consents"`
	// Descriptors may modify the action's noun, before or after it: they
	// say which thing ("the next available appointment", "il primo
	// appuntamento libero"), never what is done to it.
	Descriptors []string `yaml:"descriptors"`
	// LinkingDeterminers continue a free phrase past a noun where the
	// finite verb comes last (de genitive "der": "mit den Unterlagen der
	// Praxis"); any other determiner there starts what the verb governs.
	LinkingDeterminers []string `yaml:"linking_determiners"`
	// WhenLinks are the words that, opening a link before a date, may as
	// well say when to act as which thing ("submit the appeal *for* the
	// 3rd", "den Antrag *für* Montag"): a date reached through a link that
	// starts with one names no object, so unless the call binds it, it
	// stays a stray value and the question is not plain.
	WhenLinks []string `yaml:"when_links"`
	// PostnominalModifiers: up to two content words right after an object
	// describe it ("il primo appuntamento libero", "la cita pendiente").
	PostnominalModifiers bool `yaml:"postnominal_modifiers"`
	// VerbFirstEndings: with verb_first_asks, the endings of the first
	// person forms that ask leave ("presento", "procedemos"); another
	// person ("¿Usted presenta ...?") does not.
	VerbFirstEndings []string `yaml:"verb_first_endings"`
	// VerbFirstWords are first person forms no ending gives (pt "dou").
	VerbFirstWords []string `yaml:"verb_first_words"`
	// PartyPrepositions open a phrase naming who the action involves, at
	// the end of the proposal ("with the hygienist", "to the board").
	PartyPrepositions []string `yaml:"party_prepositions"`
	// PartyArticles are party prepositions that hold their article (es
	// "al", de "beim", fr "au"): the party may follow them directly.
	PartyArticles []string `yaml:"party_articles"`
	// PlacePrepositions open a phrase naming where the thing the action
	// acts on is, or where the money goes, right after the object ("the
	// booking at the Harbor Inn", "auf Ihr Sparkonto", "al ristorante Da
	// Gino"): up to maxPlace content words, at the end of the proposal.
	PlacePrepositions []string `yaml:"place_prepositions"`
	// InsteadOfWaiting are the phrases that turn down waiting after a
	// proposal to act ("rather than waiting for", de "statt bis * zu
	// warten"): from one to the end of the sentence, only dates, plain
	// words and tags may follow.
	InsteadOfWaiting []string `yaml:"instead_of_waiting"`
	// TimeWeekdays are weekday names the values reader leaves out alone
	// because they are ordinals too (pt "segunda", "quarta", "quinta"):
	// right before a time they name the weekday (1 Monday to 7 Sunday).
	TimeWeekdays map[string]int `yaml:"time_weekdays"`
	// Determiners are the articles and possessives of the language: a date
	// after one and before an object, or before a time the verb acts on,
	// names which thing the action acts on ("the Friday appointment",
	// "cancel the 3 o'clock").
	Determiners []string `yaml:"determiners"`
	// DayPeriods: a part of the day said after a date, without an hour
	// ("Saturday morning", "giovedì sera"), and the hours [from, to) it
	// covers: it must agree with the call's time, or name, with the date,
	// which thing the action acts on.
	DayPeriods map[string][2]int `yaml:"day_periods"`
	// Pronouns point back to what the turn said before ("pay *it*", es
	// "¿*Lo* pago?"): a bound value may then be stated in the sentence
	// before. A pronoun right before an object or a value is its
	// determiner ("pay *that* bill"). PronounEndings are the pronouns a
	// verb form may end in (es "pagarlo", it "inviarla").
	Pronouns       []string `yaml:"pronouns"`
	PronounEndings []string `yaml:"pronoun_endings"`
	// FillerSentences are sentences that propose nothing ("thanks for
	// waiting", "got it"): a question that points back passes over them.
	FillerSentences []string `yaml:"filler_sentences"`
	// Titles stand before a name, which they explain ("dr", "mrs").
	Titles []string `yaml:"titles"`
	// Recaps mark a sentence that tells of something done ("already",
	// "I've"): a question that points back passes over it.
	Recaps []string `yaml:"recaps"`
	// Ask is the plain question a refusal suggests, with {verb} (the
	// tool's verb as the policy writes it), {object} and {art} (the
	// article ask_articles gives the object); AskVerbOnly is used when
	// the verb names its object itself ("send a copy") or the tool has no
	// object.
	Ask         string `yaml:"ask"`
	AskVerbOnly string `yaml:"ask_verb_only"`
	// AskArticles gives {art} by the object's ending, longest ending
	// first; the key "" is the default.
	AskArticles map[string]string `yaml:"ask_articles"`
	// Mix lists languages whose yes words callers mix into this one
	// ("vale, okay, do it"): their affirmatives, fillers and politeness
	// count in a plain yes, and their negations refuse as this language's
	// do. Their hedges and conditions are not read (they share words with
	// this language: en "also" is de "so"); a word of them is no word of
	// a yes, and still refuses.
	Mix []string `yaml:"mix"`

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
	// IrregularNouns are nouns a verb makes that no suffix gives
	// ("submit": [submission]): like its objects, they name what the
	// action acts on, not the action.
	IrregularNouns map[string][]string `yaml:"irregular_nouns"`
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
	lang                            string
	name                            string
	maxPlainWords                   int
	decimalComma                    bool
	ordinalDot                      bool
	abbreviations                   map[string]bool
	keepAccents                     map[string]string // NFC lower-case word → its kept token
	keepFinalAccents, verbFirstAsks bool
	compoundObjects, postnominal    bool
	verbSecond                      bool
	elisions                        []string
	clitics                         []clitic

	affirmatives, negationIdioms, negations, hedges, conditions, additions phraseList
	questionWords, fillers, politeness, glue, requests, quantityWords      phraseList
	confirmRequests, questionStarts, proceed, confirmVerbs, backReferences phraseList
	particles, openQuestions, alternatives, prepositions, conjunctions     phraseList
	sideClauses                                                            phraseList
	governBefore                                                           bool

	frames, tags, plainWords, fillerSentences, titles, recaps phraseList
	statementWords, partyPrepositions, modifierLinks          phraseList
	containers                                                phraseList
	partyArticles, pronouns, placePrepositions                phraseList
	insteadOfWaiting                                          phraseList
	dayPeriods                                                phraseList
	timeWeekdays                                              map[string]int
	determiners                                               map[string]bool
	dayPeriodHours                                            map[*phrase][2]int
	pronounEndings                                            []string
	verbFirstEndings                                          []string
	verbFirstWords                                            map[string]bool
	// functionWords are the words of the lists that keep a question
	// from being plain (negations, conditions, ...), and of the links
	// and prepositions that open a slot: none may fill a modifier or
	// party slot.
	functionWords map[string]bool
	// notModifiers may fill no slot after an object or a verb.
	notModifiers map[string]bool
	// operators holds every phrase of File.Operators, operatorClass the
	// class of each; harmless, freePrepositions, listConjunctions as in
	// File; linkingDeterminers as a set.
	operators, harmless, freePrepositions, listConjunctions phraseList
	notModifierPhrases, mindFrames, mindConsents            phraseList
	weakConjunctions                                        map[string]bool
	infinitiveEndings                                       []string
	operatorClass                                           map[*phrase]string
	linkingDeterminers, descriptors, nameParticles          map[string]bool
	// whenLinks: a link opened by one of these words does not tie a date
	// to an object (File.WhenLinks).
	whenLinks        map[string]bool
	ask, askVerbOnly string
	askArticles      map[string]string
	askArticleEnds   []string
	mixLangs         []string
	// mixView holds, compiled for this locale, the yes words of the
	// languages it mixes in that are no words of its own (see Mix), in
	// its negation_idioms, negations, affirmatives, fillers and
	// politeness; nil when it mixes nothing in.
	mixView *Locale
	// file is the locale as written, for the locales that mix it in.
	file *File

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
	for _, lang := range slices.Sorted(maps.Keys(s.byLang)) {
		l := s.byLang[lang]
		for _, m := range l.mixLangs {
			ml, ok := s.byLang[m]
			if !ok {
				errs = append(errs, fmt.Errorf("%s: mix: no locale for %q", files[lang].name, m))
				continue
			}
			l.mixIn(ml.file)
		}
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
		"frames":                        f.Frames,
		"statement_words":               f.StatementWords,
		"party_prepositions":            f.PartyPrepositions,
		"party_articles":                f.PartyArticles,
		"place_prepositions":            f.PlacePrepositions,
		"instead_of_waiting":            f.InsteadOfWaiting,
		"pronouns":                      f.Pronouns,
		"determiners":                   f.Determiners,
		"pronoun_endings":               f.PronounEndings,
		"modifier_links":                f.ModifierLinks,
		"not_modifiers":                 f.NotModifiers,
		"when_links":                    f.WhenLinks,
		"harmless":                      f.Harmless,
		"free_prepositions":             f.FreePrepositions,
		"list_conjunctions":             f.ListConjunctions,
		"linking_determiners":           f.LinkingDeterminers,
		"descriptors":                   f.Descriptors,
		"mind_frames":                   f.MindFrames,
		"mind_consents":                 f.MindConsents,
		"name_particles":                f.NameParticles,
		"weak_conjunctions":             f.WeakConjunctions,
		"infinitive_endings":            f.InfinitiveEndings,
		"containers":                    f.Containers,
		"verb_first_endings":            f.VerbFirstEndings,
		"verb_first_words":              f.VerbFirstWords,
		"tags":                          f.Tags,
		"plain_words":                   f.PlainWords,
		"filler_sentences":              f.FillerSentences,
		"titles":                        f.Titles,
		"recaps":                        f.Recaps,
		"mix":                           f.Mix,
	}
	for _, class := range slices.Sorted(maps.Keys(f.Operators)) {
		if !slices.Contains(OperatorClasses, class) {
			bad("operators", "%q is no operator class (%s)", class, strings.Join(OperatorClasses, ", "))
		}
		lists["operators."+class] = f.Operators[class]
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
			case strings.HasPrefix(fp, "# ") || fp == "#":
				bad(fmt.Sprintf("%s[%d]", key, i), "%q: a phrase may not start with #", p)
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
	for _, key := range []string{"ask", "ask_verb_only"} {
		tmpl := map[string]string{"ask": f.Ask, "ask_verb_only": f.AskVerbOnly}[key]
		if tmpl != "" && !strings.Contains(tmpl, "{verb}") {
			bad(key, "%q: the template must hold {verb}", tmpl)
		}
	}
	if f.Ask != "" && !strings.Contains(f.Ask, "{object}") {
		bad("ask", "%q: the template must hold {object} (ask_verb_only is for a verb alone)", f.Ask)
	}
	for _, m := range f.Mix {
		if strings.TrimSpace(m) == lang {
			bad("mix", "%q: a language does not mix with itself", m)
		}
	}
	for _, w := range slices.Sorted(maps.Keys(f.TimeWeekdays)) {
		if d := f.TimeWeekdays[w]; d < 1 || d > 7 || strings.ContainsRune(strings.TrimSpace(w), ' ') {
			bad("time_weekdays", "%q: %d: a weekday is one word and 1 (Monday) to 7 (Sunday)", w, d)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(f.DayPeriods)) {
		if r := f.DayPeriods[k]; strings.TrimSpace(k) == "" || r[0] < 0 || r[1] <= r[0] || r[1] > 48 {
			bad("day_periods", "%q: [%d, %d] is not a part of the day in hours", k, r[0], r[1])
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
	l.keepFinalAccents, l.verbFirstAsks, l.compoundObjects = f.KeepFinalAccents, f.VerbFirstAsks, f.CompoundObjects
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
	l.file = f
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
	l.frames = c(f.Frames)
	l.tags = c(f.Tags)
	l.plainWords = c(f.PlainWords)
	l.fillerSentences = c(f.FillerSentences)
	l.titles = c(f.Titles)
	l.recaps = c(f.Recaps)
	l.statementWords = c(f.StatementWords)
	l.partyPrepositions = c(f.PartyPrepositions)
	l.partyArticles = c(f.PartyArticles)
	l.placePrepositions = c(f.PlacePrepositions)
	l.insteadOfWaiting = c(f.InsteadOfWaiting)
	l.pronouns = c(f.Pronouns)
	l.timeWeekdays = map[string]int{}
	for w, d := range f.TimeWeekdays {
		l.timeWeekdays[l.fold(strings.TrimSpace(w))] = d
	}
	l.determiners = map[string]bool{}
	for _, d := range f.Determiners {
		for _, w := range l.phraseWords(d) {
			l.determiners[w] = true
		}
	}
	l.dayPeriodHours = map[*phrase][2]int{}
	for _, src := range slices.Sorted(maps.Keys(f.DayPeriods)) {
		ph := compilePhrase(l, src)
		l.dayPeriods.add(ph)
		l.dayPeriodHours[ph] = f.DayPeriods[src]
	}
	for _, e := range f.PronounEndings {
		l.pronounEndings = append(l.pronounEndings, Fold(strings.TrimSpace(e)))
	}
	l.modifierLinks = c(f.ModifierLinks)
	l.containers = c(f.Containers)
	l.verbSecond = f.VerbSecond
	l.postnominal = f.PostnominalModifiers
	l.verbFirstWords = l.wordSet(f.VerbFirstWords)
	for _, e := range f.VerbFirstEndings {
		l.verbFirstEndings = append(l.verbFirstEndings, Fold(strings.TrimSpace(e)))
	}
	l.whenLinks = l.wordSet(f.WhenLinks)
	l.operatorClass = map[*phrase]string{}
	for _, class := range slices.Sorted(maps.Keys(f.Operators)) {
		for _, src := range f.Operators[class] {
			ph := compilePhrase(l, src)
			l.operators.add(ph)
			l.operatorClass[ph] = class
		}
	}
	l.harmless = c(f.Harmless)
	l.mindFrames = c(f.MindFrames)
	l.mindConsents = c(f.MindConsents)
	l.freePrepositions = c(f.FreePrepositions)
	l.listConjunctions = c(f.ListConjunctions)
	l.linkingDeterminers = map[string]bool{}
	for _, d := range f.LinkingDeterminers {
		for _, w := range l.phraseWords(d) {
			l.linkingDeterminers[w] = true
		}
	}
	l.weakConjunctions = l.wordSet(f.WeakConjunctions)
	for _, e := range f.InfinitiveEndings {
		l.infinitiveEndings = append(l.infinitiveEndings, Fold(strings.TrimSpace(e)))
	}
	l.nameParticles = map[string]bool{}
	for _, w := range f.NameParticles {
		for _, part := range l.phraseWords(w) {
			l.nameParticles[part] = true
		}
	}
	l.descriptors = map[string]bool{}
	for _, d := range f.Descriptors {
		for _, w := range l.phraseWords(d) {
			l.descriptors[w] = true
		}
	}
	l.notModifierPhrases = c(f.NotModifiers)
	l.notModifiers = map[string]bool{}
	for _, p := range f.NotModifiers {
		for _, w := range strings.Fields(l.fold(p)) {
			for _, part := range l.splitWord(w) {
				l.notModifiers[part] = true
			}
		}
	}
	l.functionWords = map[string]bool{}
	for _, list := range [][]string{f.Negations, f.Hedges, f.Conditions, f.Additions, f.QuestionWords,
		f.SideClauses, f.Alternatives, f.OpenQuestions, f.Conjunctions, f.Recaps, f.ModifierLinks, f.PartyPrepositions, f.PlacePrepositions} {
		for _, p := range list {
			for _, w := range strings.Fields(l.fold(p)) {
				for _, part := range l.splitWord(strings.Trim(w, ".,!?;:¿¡\"*~")) {
					if part != "" {
						l.functionWords[part] = true
					}
				}
			}
		}
	}
	l.ask, l.askVerbOnly = strings.TrimSpace(f.Ask), strings.TrimSpace(f.AskVerbOnly)
	l.askArticles = map[string]string{}
	for k, v := range f.AskArticles {
		l.askArticles[Fold(strings.TrimSpace(k))] = strings.TrimSpace(v)
	}
	l.askArticleEnds = sortedEnds(l.askArticles)
	for _, m := range f.Mix {
		l.mixLangs = append(l.mixLangs, strings.TrimSpace(m))
	}
	l.values = compileValues(l, &f.Values)
	return l
}

// mixIn adds the yes words of f's language to l's mixed lists, leaving
// out each phrase whose every word is a word of l's own lists: en "no" is
// pt "no" (in the), which pt judges by its own rules.
func (l *Locale) mixIn(f *File) {
	own := map[string]bool{}
	for _, list := range l.file.lists() {
		for _, p := range list {
			for _, w := range l.phraseWords(p) {
				own[w] = true
			}
		}
	}
	add := func(pl *phraseList, srcs []string) {
		for _, src := range srcs {
			ws := l.phraseWords(src)
			foreign := false
			for _, w := range ws {
				foreign = foreign || !own[w]
			}
			if foreign {
				pl.add(compilePhrase(l, src))
			}
		}
	}
	if l.mixView == nil {
		l.mixView = &Locale{lang: l.lang}
	}
	m := l.mixView
	add(&m.negationIdioms, f.NegationIdioms)
	add(&m.negations, f.Negations)
	add(&m.affirmatives, f.Affirmatives)
	add(&m.fillers, f.Fillers)
	add(&m.politeness, f.Politeness)
}

// phraseWords returns the folded words of a phrase as written, without
// its "*" and "#".
func (l *Locale) phraseWords(src string) []string {
	var out []string
	for _, w := range strings.Fields(l.fold(src)) {
		if w == "*" || w == "#" {
			continue
		}
		for _, part := range l.splitWord(strings.Trim(w, ".,!?;:¿¡\"~")) {
			if part != "" {
				out = append(out, part)
			}
		}
	}
	return out
}

// lists returns every phrase list of the file.
func (f *File) lists() [][]string {
	return [][]string{f.Affirmatives, f.NegationIdioms, f.Negations, f.Hedges, f.Conditions, f.Additions,
		f.QuestionWords, f.Fillers, f.Politeness, f.Glue, f.Requests, f.Particles, f.QuantityWords,
		f.ConfirmRequests, f.QuestionStarts, f.Proceed, f.ConfirmVerbs, f.BackReferences, f.OpenQuestions,
		f.SideClauses, f.Alternatives, f.Conjunctions, f.Prepositions, f.Frames, f.Tags, f.PlainWords,
		f.StatementWords, f.PartyPrepositions, f.PartyArticles, f.PlacePrepositions, f.InsteadOfWaiting, f.Pronouns, f.Determiners, f.ModifierLinks, f.FillerSentences, f.Titles, f.Recaps, f.NotModifiers, f.WhenLinks,
		f.Harmless, f.FreePrepositions, f.ListConjunctions, f.LinkingDeterminers, f.Descriptors, f.NameParticles, f.WeakConjunctions, f.MindFrames, f.MindConsents, f.operatorPhrases()}
}

// OperatorClasses are the classes of File.Operators, in the order a
// refusal names them.
var OperatorClasses = []string{"negation", "alternative", "condition", "deferral", "embedding", "purpose", "retraction", "hedge", "action_changer", "addition", "sequence"}

// operatorPhrases returns every phrase of f.Operators, class by class.
func (f *File) operatorPhrases() []string {
	var out []string
	for _, class := range slices.Sorted(maps.Keys(f.Operators)) {
		out = append(out, f.Operators[class]...)
	}
	return out
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

// wordSet is the folded words of a locale list, as a set.
func (l *Locale) wordSet(words []string) map[string]bool {
	set := make(map[string]bool, len(words))
	for _, w := range words {
		set[l.fold(strings.TrimSpace(w))] = true
	}
	return set
}
