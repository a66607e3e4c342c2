package patterns

// StatesQuantity reports whether t states a quantity: a number, a number
// word or a quantity word ("two more", "another one").
func (l *Locale) StatesQuantity(t Text) bool {
	for _, s := range t.Sentences {
		if len(l.quantityWords.find(s.Tokens)) > 0 {
			return true
		}
		for _, tok := range s.Tokens {
			if _, ok := l.ParseNumber(tok); ok {
				return true
			}
		}
	}
	return false
}

// ContainsValue reports whether t states value: its words, folded, stand
// together in one sentence of t.
func (l *Locale) ContainsValue(t Text, value string) bool {
	want := l.Parse(value).Tokens()
	if len(want) == 0 {
		return false
	}
	for _, s := range t.Sentences {
		for i := 0; i+len(want) <= len(s.Tokens); i++ {
			ok := true
			for k, w := range want {
				if s.Tokens[i+k] != w {
					ok = false
					break
				}
			}
			if ok {
				return true
			}
		}
	}
	return false
}

// TokenSet returns the set of t's tokens.
func TokenSet(t Text) map[string]bool {
	out := map[string]bool{}
	for _, s := range t.Sentences {
		for _, tok := range s.Tokens {
			out[tok] = true
		}
	}
	return out
}
