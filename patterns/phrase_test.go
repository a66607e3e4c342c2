package patterns

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// naiveList is the matcher as it was before phraseList was indexed: every
// phrase tried at every token, those starting with an exact word first,
// then those starting with a prefix or a form set, each in the order
// added; the first of equally long matches wins.
type naiveList []*phrase

func (nl naiveList) bestAt(toks []string, i int) span {
	best := span{start: -1}
	for _, later := range []bool{false, true} {
		for _, p := range nl {
			if first := p.elems[0]; (first.prefix || first.forms != nil) != later {
				continue
			}
			if end := matchAt(p.elems, toks, i); end > i && (best.start < 0 || end > best.end) {
				best = span{start: i, end: end, p: p}
			}
		}
	}
	return best
}

// phrasesOf returns every phrase of pl once, in no particular order.
func phrasesOf(pl *phraseList) []*phrase {
	var out []*phrase
	for _, rs := range pl.byFirst {
		for _, r := range rs {
			out = append(out, r.p)
		}
	}
	for _, r := range pl.prefixes {
		out = append(out, r.p)
	}
	slices.SortFunc(out, func(a, b *phrase) int {
		switch {
		case a == b:
			return 0
		case a.src < b.src:
			return -1
		case a.src > b.src:
			return 1
		}
		return len(a.elems) - len(b.elems)
	})
	return slices.Compact(out)
}

// TestIndexedListMatchesNaive holds the indexed phrase lists (first-word
// filter, form sets indexed by form, prefixes by first byte) to the naive
// matcher: the same best match, phrase for phrase, at every position of
// random token sequences drawn from the phrases' own words, every
// locale's lists and a compiled action's included.
func TestIndexedListMatchesNaive(t *testing.T) {
	set, err := LoadEmbedded()
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 11))
	for _, lang := range set.Langs() {
		l := set.Get(lang)
		a := l.CompileAction([]string{"book", "schedule", "send in", "submit", "cancel"}, []string{"appointment", "appeal", "payment"})
		lists := []*phraseList{
			&l.affirmatives, &l.negationIdioms, &l.negations, &l.hedges, &l.conditions, &l.additions,
			&l.questionWords, &l.fillers, &l.politeness, &l.glue, &l.requests, &l.quantityWords,
			&l.confirmRequests, &l.questionStarts, &l.proceed, &l.confirmVerbs, &l.backReferences,
			&l.particles, &l.openQuestions, &l.alternatives, &l.prepositions, &l.conjunctions,
			&l.sideClauses, &a.verbs, &a.objects,
		}
		// The words sequences are drawn from: every exact word and form,
		// each prefix with and without an ending, and some that start
		// nothing.
		vocab := []string{"zzz", "the", "a", "it", "x", "é", ""}
		var all []*phrase
		for _, pl := range lists {
			all = append(all, phrasesOf(pl)...)
		}
		for _, p := range all {
			for _, e := range p.elems {
				switch {
				case e.forms != nil:
					for f := range e.forms {
						vocab = append(vocab, f)
					}
				case e.prefix:
					vocab = append(vocab, e.word, e.word+"s", e.word+"ation")
				case !e.gap:
					vocab = append(vocab, e.word)
				}
			}
		}
		slices.Sort(vocab)
		vocab = slices.Compact(vocab)

		// Lists rebuilt from their phrases in a shuffled order, with the
		// naive list in that same order, plus one list of every phrase.
		cases := make([][]*phrase, 0, len(lists)+1)
		for _, pl := range lists {
			cases = append(cases, phrasesOf(pl))
		}
		cases = append(cases, all)
		compared := 0
		for _, ps := range cases {
			rng.Shuffle(len(ps), func(i, j int) { ps[i], ps[j] = ps[j], ps[i] })
			var pl phraseList
			for _, p := range ps {
				pl.add(p)
			}
			naive := naiveList(ps)
			for range 300 {
				toks := make([]string, 1+rng.IntN(10))
				for k := range toks {
					toks[k] = vocab[rng.IntN(len(vocab))]
				}
				for i := range toks {
					got, want := pl.bestAt(toks, i), naive.bestAt(toks, i)
					if got != want {
						t.Fatalf("%s: bestAt(%q, %d) = %+v (%v), naive %+v (%v)", lang, toks, i, got, srcOf(got), want, srcOf(want))
					}
					if want.start >= 0 {
						compared++
					}
				}
			}
		}
		if compared < 1000 {
			t.Errorf("%s: only %d positions matched anything; the sequences do not exercise the lists", lang, compared)
		}
	}
}

func srcOf(s span) string {
	if s.p == nil {
		return "-"
	}
	return s.p.src
}
