package transcript

import "strings"

// groupTurns leaves out agent utterances answering skipResponseID (when it
// is not empty) and joins runs of one speaker into turns. The turns'
// utterances are utts itself when nothing is left out, else a copy.
//
// It runs on every Check, so it allocates little whatever the call holds:
// the turns, the kept utterances when some are left out, and one text for
// each turn of more than one utterance (a turn of one uses its utterance's
// text).
func groupTurns(utts []Utterance, skipResponseID string) []Turn {
	// Count first, so each slice is allocated once at its size.
	nKept, nTurns := 0, 0
	var last Speaker
	for i := range utts {
		u := &utts[i]
		if skipped(u, skipResponseID) {
			continue
		}
		if nKept == 0 || u.Speaker != last {
			nTurns++
			last = u.Speaker
		}
		nKept++
	}
	if nKept == 0 {
		return nil
	}
	kept := utts
	if nKept < len(utts) {
		kept = make([]Utterance, 0, nKept)
		for i := range utts {
			if !skipped(&utts[i], skipResponseID) {
				kept = append(kept, utts[i])
			}
		}
	}

	turns := make([]Turn, 0, nTurns)
	start := 0
	for i := 1; i <= len(kept); i++ {
		if i < len(kept) && kept[i].Speaker == kept[start].Speaker {
			continue
		}
		// A full slice expression, so appending to one turn's utterances
		// cannot overwrite the next turn's.
		turns = append(turns, makeTurn(kept[start:i:i]))
		start = i
	}
	return turns
}

// skipped reports whether u is an agent utterance answering skipResponseID.
func skipped(u *Utterance, skipResponseID string) bool {
	return skipResponseID != "" && u.Speaker == Agent && u.ResponseID == skipResponseID
}

// makeTurn joins one speaker's consecutive utterances. The turn is named by
// the smallest ID of its utterances, the first of them to arrive (IDs count
// arrivals, or are stream sequences): a late utterance that sorts in front
// of the turn, or after it, joins it without renaming it, so a caller turn
// already used as evidence stays used.
func makeTurn(us []Utterance) Turn {
	first, last := &us[0], &us[len(us)-1]
	id := first.ID
	for i := range us {
		id = min(id, us[i].ID)
	}
	t := Turn{
		ID:         id,
		Speaker:    first.Speaker,
		Utterances: us,
		StartMS:    first.StartMS,
		EndMS:      last.EndMS,
		HasTimes:   true,
		FirstSeq:   first.Seq,
		LastSeq:    last.Seq,
		ReceivedAt: last.ReceivedAt,
	}
	for i := range us {
		u := &us[i]
		if !u.HasTimes {
			t.HasTimes = false
		}
		if u.Lang != "" {
			t.Lang = u.Lang
		}
		if u.ResponseID != "" {
			t.ResponseID = u.ResponseID
		}
		if u.Source != "" {
			t.Source = u.Source
		}
		if u.Interrupted {
			t.Interrupted = true
		}
	}
	t.Text = joinTexts(us)
	return t
}

// joinTexts joins the utterances' trimmed, non-empty texts with " ": the
// text itself for one, one allocation for more.
func joinTexts(us []Utterance) string {
	if len(us) == 1 {
		return strings.TrimSpace(us[0].Text)
	}
	n := 0
	for i := range us {
		if txt := strings.TrimSpace(us[i].Text); txt != "" {
			n += len(txt) + 1
		}
	}
	if n == 0 {
		return ""
	}
	var sb strings.Builder
	sb.Grow(n - 1)
	for i := range us {
		if txt := strings.TrimSpace(us[i].Text); txt != "" {
			if sb.Len() > 0 {
				sb.WriteByte(' ')
			}
			sb.WriteString(txt)
		}
	}
	return sb.String()
}
