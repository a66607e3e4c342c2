package guard

import (
	"fmt"

	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
)

// phrasing names a tool's action for a message to the model: action in
// the instruction's words ("submit the appeal"), example the plain
// question to ask, in the caller's language and grammatical in it
// ("¿Quiere que proceda a presentar su apelación?"; empty when the locale
// has no template).
type phrasing struct {
	action, example string
}

// message tells the model what to do next after a decision. say names the
// tool's action; it is called only by the messages that name it (not by
// the ALLOW ones), since naming it allocates.
func message(outcome yesguardv1.Outcome, reason yesguardv1.Reason, tool string, say func() phrasing, detail string) string {
	describe := func() string { return say().action }
	// ask is built only for the refusals that use it.
	ask := func() string {
		p := say()
		if p.example == "" {
			return "Ask the caller plainly, in their language, whether to " + p.action + ", wait for their answer, and call " + tool + " only after a clear yes."
		}
		return "Ask the caller plainly whether to " + p.action + " (for example \"" + p.example + "\"), wait for their answer, and call " + tool + " only after a clear yes."
	}
	switch reason {
	case yesguardv1.Reason_REASON_CONFIRMED:
		return "Allowed: the caller confirmed. Run " + tool + ", then report its result with Complete." // as Sprintf %s: one allocation, not three
	case yesguardv1.Reason_REASON_EXPLICIT_INSTRUCTION:
		return "Allowed: the caller asked for it. Run " + tool + ", then report its result with Complete."
	case yesguardv1.Reason_REASON_NOT_REQUIRED:
		if outcome == yesguardv1.Outcome_OUTCOME_ALLOW {
			return "Allowed: " + tool + " needs no confirmation. Run it, then report its result with Complete."
		}
	case yesguardv1.Reason_REASON_NO_ANSWER:
		return "The caller has not answered yet. Do not act: wait for the caller's reply. " + ask()
	case yesguardv1.Reason_REASON_AGENT_SPOKE_AFTER:
		return "You spoke after the caller's last words, so their earlier answer no longer confirms this. " + ask()
	case yesguardv1.Reason_REASON_NOT_PLAIN:
		return fmt.Sprintf("The caller's answer was not a plain yes (%s). Do not act: respond to what they said first. Then %s", detail, lowerFirst(ask()))
	case yesguardv1.Reason_REASON_NEGATED:
		return fmt.Sprintf("The caller said no or changed their mind (%s). Do not %s; ask what they would like to do instead.", detail, describe())
	case yesguardv1.Reason_REASON_NO_QUESTION:
		return "You did not ask the caller to confirm this action, so their words are not consent. " + ask()
	case yesguardv1.Reason_REASON_QUESTION_NOT_PLAIN:
		return fmt.Sprintf("Your question was not a plain question about this action (%s), so the caller's yes does not say they want it done now. Do not act. Ask only whether to do it, with nothing else in the question: no other action, choice, condition, reason or later time. %s", detail, ask())
	case yesguardv1.Reason_REASON_ACTION_MISMATCH:
		return fmt.Sprintf("The caller's yes answered a question about something else (%s), not about this action. %s", detail, ask())
	case yesguardv1.Reason_REASON_ARGUMENT_MISMATCH:
		return fmt.Sprintf("The values in your turn do not match this call (%s). Ask again stating exactly the values you will use, and no other, wait for a clear yes, then call %s with those same values.", detail, tool)
	case yesguardv1.Reason_REASON_STALE:
		return "The caller's yes is too old to rely on. " + ask()
	case yesguardv1.Reason_REASON_EVIDENCE_USED:
		return fmt.Sprintf("That yes already allowed %s once. Do not run it again; if the caller wants it again or with other details, ask them to confirm again.", tool)
	case yesguardv1.Reason_REASON_DUPLICATE:
		return "This action was already allowed moments ago. Do not run it again: use the original result and tell the caller it is done."
	case yesguardv1.Reason_REASON_QUANTITY_REPEAT:
		return "This item was just recorded. Do not record it again unless the caller asks for a specific quantity (\"two more\"); if unsure, ask them."
	case yesguardv1.Reason_REASON_UNKNOWN_CALL:
		return fmt.Sprintf("The guard has no transcript for this call, so the caller's consent cannot be checked. Do not %s now; tell the caller you cannot complete it at the moment.", describe())
	case yesguardv1.Reason_REASON_TRANSCRIPT_UNAVAILABLE:
		return fmt.Sprintf("The transcript feed is down, so the caller's consent cannot be checked. Do not %s now; tell the caller you cannot complete it at the moment.", describe())
	case yesguardv1.Reason_REASON_CALLER_SPEAKING:
		return "The caller is still speaking. Do not act: let them finish and respond to what they say. " + ask()
	case yesguardv1.Reason_REASON_UNSUPPORTED_LANGUAGE:
		return fmt.Sprintf("The guard has no rules for the caller's language (%s), so their answer cannot be checked. Do not %s now.", detail, describe())
	}
	return fmt.Sprintf("Do not %s: the guard could not check the caller's consent (%s). Tell the caller you cannot complete it at the moment.", describe(), detail)
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	b := []byte(s)
	if b[0] >= 'A' && b[0] <= 'Z' {
		b[0] += 'a' - 'A'
	}
	return string(b)
}
