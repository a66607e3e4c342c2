package transcript

import "strings"

// groupTurns leaves out agent utterances answering skipResponseID (when it
// is not empty) and joins runs of one speaker into turns. The turns share
// no memory with utts.
func groupTurns(utts []Utterance, skipResponseID string) []Turn {
	kept := make([]Utterance, 0, len(utts))
	for _, u := range utts {
		if skipResponseID != "" && u.Speaker == Agent && u.ResponseID == skipResponseID {
			continue
		}
		kept = append(kept, u)
	}
	if len(kept) == 0 {
		return nil
	}

	var turns []Turn
	var sb strings.Builder
	start := 0
	for i := 1; i <= len(kept); i++ {
		if i < len(kept) && kept[i].Speaker == kept[start].Speaker {
			continue
		}
		// A full slice expression, so appending to one turn's utterances
		// cannot overwrite the next turn's.
		turns = append(turns, makeTurn(kept[start:i:i], &sb))
		start = i
	}
	return turns
}

func makeTurn(us []Utterance, sb *strings.Builder) Turn {
	first, last := us[0], us[len(us)-1]
	t := Turn{
		ID:         first.ID,
		Speaker:    first.Speaker,
		Utterances: us,
		StartMS:    first.StartMS,
		EndMS:      last.EndMS,
		HasTimes:   true,
		FirstSeq:   first.Seq,
		LastSeq:    last.Seq,
		ReceivedAt: last.ReceivedAt,
	}
	sb.Reset()
	for _, u := range us {
		if txt := strings.TrimSpace(u.Text); txt != "" {
			if sb.Len() > 0 {
				sb.WriteByte(' ')
			}
			sb.WriteString(txt)
		}
		if !u.HasTimes {
			t.HasTimes = false
		}
		if u.Lang != "" {
			t.Lang = u.Lang
		}
		if u.ResponseID != "" {
			t.ResponseID = u.ResponseID
		}
		if u.Interrupted {
			t.Interrupted = true
		}
	}
	t.Text = sb.String()
	return t
}
