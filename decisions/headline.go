package decisions

import yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"

// Headline is the record that says what happened in a call, of its
// current headline cur and a newer record next: the newer of the two if
// it decided afresh (a Check that allowed or refused), or if cur did not
// either; else cur. So a call's headline is its newest ALLOW or REFUSE, not
// the DUPLICATE, IGNORED, Complete or Redeem that followed it; a call
// with none has its newest record.
func Headline(cur, next *yesguardv1.Decision) *yesguardv1.Decision {
	if cur == nil || decides(next) || !decides(cur) {
		return next
	}
	return cur
}

// decides reports whether d is a Check that allowed or refused.
func decides(d *yesguardv1.Decision) bool {
	switch d.GetKind() {
	case yesguardv1.DecisionKind_DECISION_KIND_CHECK, yesguardv1.DecisionKind_DECISION_KIND_UNSPECIFIED:
	default:
		return false
	}
	o := d.GetOutcome()
	return o == yesguardv1.Outcome_OUTCOME_ALLOW || o == yesguardv1.Outcome_OUTCOME_REFUSE
}
