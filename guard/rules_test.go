package guard

import (
	"fmt"
	"testing"
	"time"

	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
	"github.com/yesguard/yesguard/transcript"
)

const (
	allow   = yesguardv1.Outcome_OUTCOME_ALLOW
	refuse  = yesguardv1.Outcome_OUTCOME_REFUSE
	dup     = yesguardv1.Outcome_OUTCOME_DUPLICATE
	ignored = yesguardv1.Outcome_OUTCOME_IGNORED
)

type line struct {
	sp   transcript.Speaker
	text string
}

func agent(s string) line  { return line{transcript.Agent, s} }
func caller(s string) line { return line{transcript.Caller, s} }

// TestRules drives each rule with a whole dialogue already in the
// transcript, so no case waits.
func TestRules(t *testing.T) {
	appeal := map[string]any{"appeal_id": "A-17"}
	cases := []struct {
		name   string
		lines  []line
		tool   string
		args   map[string]any
		out    yesguardv1.Outcome
		reason yesguardv1.Reason
	}{
		{"plain yes to a question", []line{agent("I can submit your appeal now. Shall I submit it?"), caller("Yes.")}, "submit_appeal", appeal, allow, yesguardv1.Reason_REASON_CONFIRMED},
		{"yes with fillers and politeness", []line{agent("Shall I submit the appeal?"), caller("Um, yeah, go ahead please, thank you.")}, "submit_appeal", appeal, allow, yesguardv1.Reason_REASON_CONFIRMED},
		{"yes naming the action", []line{agent("Shall I submit the appeal?"), caller("Yes, submit it.")}, "submit_appeal", appeal, allow, yesguardv1.Reason_REASON_CONFIRMED},
		{"probe 1: okay to an announcement", []line{agent("I will now submit the request."), caller("Okay.")}, "submit_appeal", appeal, refuse, yesguardv1.Reason_REASON_NO_QUESTION},
		{"announcement with go ahead is not a question", []line{agent("I'll go ahead and submit the appeal."), caller("Okay.")}, "submit_appeal", appeal, refuse, yesguardv1.Reason_REASON_NO_QUESTION},
		{"probe 2: yes with a question", []line{agent("Shall I submit the appeal?"), caller("Yes, but does that cost extra?")}, "submit_appeal", appeal, refuse, yesguardv1.Reason_REASON_NOT_PLAIN},
		{"probe 3a: pre-emptive yes go ahead", []line{caller("Yes, go ahead.")}, "submit_appeal", appeal, refuse, yesguardv1.Reason_REASON_NO_QUESTION},
		{"probe 3b: explicit instruction", []line{caller("Yes, please submit the appeal.")}, "submit_appeal", appeal, allow, yesguardv1.Reason_REASON_EXPLICIT_INSTRUCTION},
		{"explicit instruction after a statement", []line{agent("Your appeal form is complete."), caller("Great, please file the appeal.")}, "submit_appeal", appeal, allow, yesguardv1.Reason_REASON_EXPLICIT_INSTRUCTION},
		{"explicit instruction with a hedge", []line{agent("Your appeal form is complete."), caller("I guess submit the appeal.")}, "submit_appeal", appeal, refuse, yesguardv1.Reason_REASON_NO_QUESTION},
		{"probe 4: rambling yes", []line{agent("Shall I submit the appeal?"), caller("Well I was thinking about it last night and talked it over with my sister and in the end we figured yes")}, "submit_appeal", appeal, refuse, yesguardv1.Reason_REASON_NOT_PLAIN},
		{"probe 5: yes then no", []line{agent("Shall I submit the appeal?"), caller("Yes. Wait, no.")}, "submit_appeal", appeal, refuse, yesguardv1.Reason_REASON_NEGATED},
		{"yes then no as two finals is one turn", []line{agent("Shall I submit the appeal?"), caller("Yes."), caller("Wait, no.")}, "submit_appeal", appeal, refuse, yesguardv1.Reason_REASON_NEGATED},
		{"not yet", []line{agent("Shall I submit the appeal?"), caller("Not yet.")}, "submit_appeal", appeal, refuse, yesguardv1.Reason_REASON_NEGATED},
		{"hold on", []line{agent("Shall I submit the appeal?"), caller("Yeah hold on")}, "submit_appeal", appeal, refuse, yesguardv1.Reason_REASON_NEGATED},
		{"no problem is a yes idiom", []line{agent("Shall I submit the appeal?"), caller("No problem, go ahead.")}, "submit_appeal", appeal, allow, yesguardv1.Reason_REASON_CONFIRMED},
		{"hedge", []line{agent("Shall I submit the appeal?"), caller("I guess so.")}, "submit_appeal", appeal, refuse, yesguardv1.Reason_REASON_NOT_PLAIN},
		{"condition", []line{agent("Shall I submit the appeal?"), caller("Yes if it's free.")}, "submit_appeal", appeal, refuse, yesguardv1.Reason_REASON_NOT_PLAIN},
		{"second request", []line{agent("Shall I submit the appeal?"), caller("Yes and also email me a copy.")}, "submit_appeal", appeal, refuse, yesguardv1.Reason_REASON_NOT_PLAIN},
		{"not a yes", []line{agent("Shall I submit the appeal?"), caller("Tell me about the weather.")}, "submit_appeal", appeal, refuse, yesguardv1.Reason_REASON_NOT_PLAIN},
		{"confirm request without a question mark", []line{agent("Please confirm if you would like to proceed with this appointment."), caller("Yes.")}, "book_appointment", nil, allow, yesguardv1.Reason_REASON_CONFIRMED},
		{"model's own words: agree to proceed with this submission", []line{agent("Do you agree to proceed with this submission"), caller("Yes I do.")}, "submit_appeal", appeal, allow, yesguardv1.Reason_REASON_CONFIRMED},
		{"object in another role", []line{agent("Would you like a copy of the appeal emailed to you?"), caller("Yes.")}, "submit_appeal", appeal, refuse, yesguardv1.Reason_REASON_ACTION_MISMATCH},
		{"last question wins", []line{agent("Shall I submit the appeal? Also, would you like a copy emailed to you?"), caller("Yes.")}, "submit_appeal", appeal, refuse, yesguardv1.Reason_REASON_ACTION_MISMATCH},
		{"points back to the turn", []line{agent("I can submit the appeal for you today. Do you want me to do that?"), caller("Sure.")}, "submit_appeal", appeal, allow, yesguardv1.Reason_REASON_CONFIRMED},
		{"points back to nothing", []line{agent("Thanks for waiting. Sound good?"), caller("Yes.")}, "submit_appeal", appeal, refuse, yesguardv1.Reason_REASON_ACTION_MISMATCH},
		{"generic proceed on its own", []line{agent("Would you like to proceed?"), caller("Yes please.")}, "submit_appeal", appeal, allow, yesguardv1.Reason_REASON_CONFIRMED},
		{"generic proceed after another action", []line{agent("I can cancel your appointment. Shall I go ahead?"), caller("Yes.")}, "book_appointment", nil, refuse, yesguardv1.Reason_REASON_ACTION_MISMATCH},
		{"proceed governing another object", []line{agent("Would you like to proceed with the refund?"), caller("Yes.")}, "submit_appeal", appeal, refuse, yesguardv1.Reason_REASON_ACTION_MISMATCH},
		{"question about another action", []line{agent("Shall I cancel the appointment?"), caller("Yes.")}, "book_appointment", nil, refuse, yesguardv1.Reason_REASON_ACTION_MISMATCH},
		{"inflected verb", []line{agent("Should I get that appeal submitted for you?"), caller("Yes.")}, "submit_appeal", appeal, allow, yesguardv1.Reason_REASON_CONFIRMED},
		{"bind: amount stated", []line{agent("Shall I pay the bill of $120.50 now?"), caller("Yes.")}, "pay_bill", map[string]any{"amount": 120.5}, allow, yesguardv1.Reason_REASON_CONFIRMED},
		{"bind: amount in words order", []line{agent("That's 120.50 dollars. Shall I pay it?"), caller("Yes.")}, "pay_bill", map[string]any{"amount": "120.50"}, allow, yesguardv1.Reason_REASON_CONFIRMED},
		{"bind: amount differs", []line{agent("Shall I pay the bill of $120.50 now?"), caller("Yes.")}, "pay_bill", map[string]any{"amount": 130}, refuse, yesguardv1.Reason_REASON_ARGUMENT_MISMATCH},
		{"bind: argument missing", []line{agent("Shall I pay the bill of $120.50 now?"), caller("Yes.")}, "pay_bill", nil, refuse, yesguardv1.Reason_REASON_ARGUMENT_MISMATCH},
		{"agent spoke after the yes", []line{agent("Shall I submit the appeal?"), caller("Yes."), agent("Is there anything else?")}, "submit_appeal", appeal, refuse, yesguardv1.Reason_REASON_AGENT_SPOKE_AFTER},
		{"unlisted tool judged from its name", []line{agent("Shall I refund the order?"), caller("Yes.")}, "refund_order", nil, allow, yesguardv1.Reason_REASON_CONFIRMED},
		{"unlisted tool, question about something else", []line{agent("Shall I submit the appeal?"), caller("Yes.")}, "refund_order", nil, refuse, yesguardv1.Reason_REASON_ACTION_MISMATCH},
		{"proceed governing another action's noun", []line{agent("Would you like to proceed with the cancellation of your appointment?"), caller("Yes.")}, "book_appointment", nil, refuse, yesguardv1.Reason_REASON_ACTION_MISMATCH},
		{"read-back naming the object is not about submitting", []line{agent("I have saved your appeal. Is that okay?"), caller("Yes.")}, "submit_appeal", appeal, refuse, yesguardv1.Reason_REASON_ACTION_MISMATCH},
		{"object two actions share does not say which", []line{agent("Would you like to proceed with your subscription?"), caller("Yes.")}, "cancel_subscription", nil, refuse, yesguardv1.Reason_REASON_ACTION_MISMATCH},
		{"shared object, the turn names the action", []line{agent("I can renew your subscription today. Would you like to proceed with your subscription?"), caller("Yes.")}, "renew_subscription", nil, allow, yesguardv1.Reason_REASON_CONFIRMED},
		{"the README's booking example", []line{agent("Shall I book your appointment for Tuesday at 3pm?"), caller("Yes please.")}, "book_appointment", map[string]any{"day": "tuesday", "time": "15:00"}, allow, yesguardv1.Reason_REASON_CONFIRMED},
		{"the README's booking example, another day", []line{agent("Shall I book your appointment for Tuesday at 3pm?"), caller("Yes please.")}, "book_appointment", map[string]any{"day": "wednesday", "time": "15:00"}, refuse, yesguardv1.Reason_REASON_ARGUMENT_MISMATCH},
		{"shared object, what the turn adds after it is free", []line{agent("I can renew your subscription for another year at the same price. Would you like to proceed with your subscription?"), caller("Yes.")}, "renew_subscription", nil, allow, yesguardv1.Reason_REASON_CONFIRMED},
		{"shared object, an operator in what the turn adds is not plain", []line{agent("I can renew your subscription as a trial for another year. Would you like to proceed with your subscription?"), caller("Yes.")}, "renew_subscription", nil, refuse, yesguardv1.Reason_REASON_QUESTION_NOT_PLAIN},
		{"shared object, the turn names the other action", []line{agent("I can renew your subscription for another year. Would you like to proceed with your subscription?"), caller("Yes.")}, "cancel_subscription", nil, refuse, yesguardv1.Reason_REASON_ACTION_MISMATCH},
		{"explicit instruction naming the object", []line{agent("Thanks for calling, how can I help?"), caller("I'd like to cancel my appointment please.")}, "cancel_appointment", nil, allow, yesguardv1.Reason_REASON_EXPLICIT_INSTRUCTION},
		{"verb in a side clause is not what is asked", []line{agent("Before I submit it, would you like me to read it back to you?"), caller("Yes please.")}, "submit_appeal", appeal, refuse, yesguardv1.Reason_REASON_ACTION_MISMATCH},
		{"a time clause is not plain", []line{agent("Once you're happy with it, shall I submit the appeal?"), caller("Yes.")}, "submit_appeal", appeal, refuse, yesguardv1.Reason_REASON_QUESTION_NOT_PLAIN},
		{"a question about the past asks for no action", []line{agent("Have you already submitted an appeal for this claim?"), caller("Yes.")}, "submit_appeal", appeal, refuse, yesguardv1.Reason_REASON_NO_QUESTION},
		{"an abbreviation does not end the question", []line{agent("Would you like me to book you with Dr. Patel on Tuesday at 3?"), caller("Yes, Tuesday at 3 is great.")}, "book_appointment", map[string]any{"slot": "2026-12-08T15:00"}, allow, yesguardv1.Reason_REASON_CONFIRMED},
		{"p.m. does not end the question", []line{agent("Shall I book it for 3 p.m. on Tuesday?"), caller("Yes.")}, "book_appointment", map[string]any{"slot": "2026-12-08T15:00"}, allow, yesguardv1.Reason_REASON_CONFIRMED},
		{"shared verb with this tool's object", []line{agent("Shall I cancel your subscription?"), caller("Yes.")}, "cancel_subscription", nil, allow, yesguardv1.Reason_REASON_CONFIRMED},
		{"shared verb without an object", []line{agent("Shall I cancel it?"), caller("Yes.")}, "cancel_subscription", nil, refuse, yesguardv1.Reason_REASON_ACTION_MISMATCH},
		{"shared verb with the other tool's object", []line{agent("Shall I cancel your subscription?"), caller("Yes.")}, "cancel_appointment", nil, refuse, yesguardv1.Reason_REASON_ACTION_MISMATCH},
		{"shared verb with a thing no sharer acts on", []line{agent("Shall I cancel your appointment?"), caller("Yes.")}, "cancel_appointment", nil, allow, yesguardv1.Reason_REASON_CONFIRMED},
		{"shared verb, the object before is a sharer's", []line{agent("I can see your yearly plan. Shall I cancel it?"), caller("Yes.")}, "cancel_appointment", nil, refuse, yesguardv1.Reason_REASON_ACTION_MISMATCH},
		{"shared verb, the object in the sentence before", []line{agent("I can see your yearly plan. Shall I cancel it?"), caller("Yes.")}, "cancel_subscription", nil, allow, yesguardv1.Reason_REASON_CONFIRMED},
		{"reservation is a noun of book, not cancelling", []line{caller("Yes, please cancel the reservation.")}, "book_appointment", nil, refuse, yesguardv1.Reason_REASON_NO_QUESTION},
		{"a question about a state asks nothing", []line{agent("Is the appeal submitted?"), caller("Yes.")}, "submit_appeal", appeal, refuse, yesguardv1.Reason_REASON_QUESTION_NOT_PLAIN},
		{"would you mind: a yes means no", []line{agent("Would you mind if I submitted the appeal?"), caller("Yes.")}, "submit_appeal", appeal, refuse, yesguardv1.Reason_REASON_NOT_PLAIN},
		{"would you mind: a no that says go ahead", []line{agent("Would you mind if I submitted the appeal?"), caller("No, not at all, go ahead.")}, "submit_appeal", appeal, allow, yesguardv1.Reason_REASON_CONFIRMED},
		{"would you mind: a bare no", []line{agent("Would you mind if I submitted the appeal?"), caller("No.")}, "submit_appeal", appeal, refuse, yesguardv1.Reason_REASON_NEGATED},
		{"unlisted tool joining two actions", []line{agent("Shall I submit your appeal?"), caller("Yes.")}, "submit_appeal_and_close_account", nil, refuse, yesguardv1.Reason_REASON_ACTION_MISMATCH},
		{"recap of another action done, then go ahead", []line{agent("I've cancelled your old appointment. I can book the new appointment for you. Shall I go ahead?"), caller("Yes.")}, "book_appointment", nil, allow, yesguardv1.Reason_REASON_CONFIRMED},
		{"recap of another action done, the proposal is another again", []line{agent("I've booked Tuesday for you. I can also cancel the Monday one. Shall I go ahead?"), caller("Yes.")}, "book_appointment", nil, refuse, yesguardv1.Reason_REASON_ACTION_MISMATCH},
		{"a time that is not the slot", []line{agent("Shall I book it for 3 p.m. on Tuesday?"), caller("Yes.")}, "book_appointment", map[string]any{"slot": "2026-12-08T15:30"}, refuse, yesguardv1.Reason_REASON_ARGUMENT_MISMATCH},
		{"a weekday that is not the slot's", []line{agent("Shall I book it for 3 p.m. on Wednesday?"), caller("Yes.")}, "book_appointment", map[string]any{"slot": "2026-12-08T15:00"}, refuse, yesguardv1.Reason_REASON_ARGUMENT_MISMATCH},
		{"a second amount in the question", []line{agent("Shall I pay the bill of $71.25 and $10?"), caller("Yes.")}, "pay_bill", map[string]any{"amount": 71.25}, refuse, yesguardv1.Reason_REASON_ARGUMENT_MISMATCH},
		{"the amount of the bill before", []line{agent("Your previous bill was $64.00; the new total is $71.25. Shall I pay it?"), caller("Yes.")}, "pay_bill", map[string]any{"amount": 64}, refuse, yesguardv1.Reason_REASON_ARGUMENT_MISMATCH},
		{"an amount in words", []line{agent("Shall I pay the bill of one hundred twenty dollars fifty?"), caller("Yes.")}, "pay_bill", map[string]any{"amount": 120.5}, allow, yesguardv1.Reason_REASON_CONFIRMED},
		{"an amount compared exactly", []line{agent("Shall I pay the bill of $120.50?"), caller("Yes.")}, "pay_bill", map[string]any{"amount": 120.504}, refuse, yesguardv1.Reason_REASON_ARGUMENT_MISMATCH},
		{"a date that names which appointment", []line{agent("Shall I cancel your appointment on March 3rd?"), caller("Yes.")}, "cancel_appointment", map[string]any{"appointment_id": "APT-3"}, allow, yesguardv1.Reason_REASON_CONFIRMED},
		{"a date that says when to pay", []line{agent("Shall I pay the bill of $71.25 on Friday?"), caller("Yes.")}, "pay_bill", map[string]any{"amount": 71.25}, refuse, yesguardv1.Reason_REASON_ARGUMENT_MISMATCH},
		{"deferred", []line{agent("Shall I submit the appeal later?"), caller("Yes.")}, "submit_appeal", appeal, refuse, yesguardv1.Reason_REASON_QUESTION_NOT_PLAIN},
		{"an alternative", []line{agent("Shall I submit the appeal, or would you rather wait?"), caller("Yes.")}, "submit_appeal", appeal, refuse, yesguardv1.Reason_REASON_NO_QUESTION},
		{"instead of", []line{agent("Should I cancel the appointment rather than book it?"), caller("Yes.")}, "book_appointment", nil, refuse, yesguardv1.Reason_REASON_QUESTION_NOT_PLAIN},
		{"purpose clause", []line{agent("Can I save your appeal so you can submit it yourself tomorrow?"), caller("Yes.")}, "submit_appeal", appeal, refuse, yesguardv1.Reason_REASON_QUESTION_NOT_PLAIN},
		{"a recogniser's run-on question", []line{agent("i've got everything for the appeal shall i submit it now"), caller("yes")}, "submit_appeal", appeal, allow, yesguardv1.Reason_REASON_CONFIRMED},
		{"tool that needs no confirmation", []line{agent("Let me look that up.")}, "lookup_order", nil, allow, yesguardv1.Reason_REASON_NOT_REQUIRED},
	}
	h := newHarness(t, "testdata/policy.yaml")
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			call := fmt.Sprintf("rules-%d", i)
			for _, l := range tc.lines {
				h.say(call, l.sp, l.text)
			}
			resp := h.check(call, tc.tool, tc.args)
			want(t, resp, tc.out, tc.reason)
			if tc.out == refuse && resp.GetEvidence().GetDetail() == "" {
				t.Errorf("refusal without a detail: %v", resp.GetEvidence())
			}
		})
	}
}

func TestAgentFillerWithOwnResponseIDDoesNotCount(t *testing.T) {
	h := newHarness(t, "testdata/policy.yaml")
	h.say("c1", transcript.Agent, "Shall I submit the appeal?", withResponse("r0"))
	h.say("c1", transcript.Caller, "Yes.")
	h.say("c1", transcript.Agent, "One moment while I submit that.", withResponse("r1"))
	want(t, h.check("c1", "submit_appeal", nil, respID("r1")), allow, yesguardv1.Reason_REASON_CONFIRMED)

	// The same filler under another response id is the agent speaking.
	h.say("c2", transcript.Agent, "Shall I submit the appeal?", withResponse("r0"))
	h.say("c2", transcript.Caller, "Yes.")
	h.say("c2", transcript.Agent, "One moment while I submit that.", withResponse("r1"))
	want(t, h.check("c2", "submit_appeal", nil, respID("r9")), refuse, yesguardv1.Reason_REASON_AGENT_SPOKE_AFTER)
}

// A tool call sent together with its question carries the question's
// response id: that speech is the question, not filler, so the Check waits
// for the answer to it instead of judging the yes before it.
func TestOwnResponseThatAsksIsTheQuestion(t *testing.T) {
	h := longWait(t)
	h.say("c", transcript.Agent, "Shall I book you in for the appointment?", withResponse("r0"))
	h.say("c", transcript.Caller, "Yes.")
	h.say("c", transcript.Agent, "Shall I submit the appeal as well?", withResponse("r1"))
	got := checkAsync(t, h, "c", respID("r1"))
	h.say("c", transcript.Caller, "No, not yet.")
	resp := <-got
	want(t, resp, refuse, yesguardv1.Reason_REASON_NEGATED)
	if resp.GetEvidence().GetAnswer().GetText() != "No, not yet." {
		t.Fatalf("judged %q, want the answer to the question sent with the call", resp.GetEvidence().GetAnswer().GetText())
	}
}

// The same for a recogniser's run-on question with no mark: the judge
// splits it at its opener, and so must the filler rule, or the yes to the
// question before it would be taken while the agent is asking again.
func TestOwnResponseRunOnQuestionIsTheQuestion(t *testing.T) {
	h := longWait(t)
	h.say("c", transcript.Agent, "Shall I submit the appeal?", withResponse("r0"))
	h.say("c", transcript.Caller, "Yes.")
	h.say("c", transcript.Agent, "got it could i submit the appeal for you now", withResponse("r1"))
	got := checkAsync(t, h, "c", respID("r1"))
	h.say("c", transcript.Caller, "No, not yet.")
	want(t, <-got, refuse, yesguardv1.Reason_REASON_NEGATED)
}

func TestUnknownCallAndOtherCalls(t *testing.T) {
	h := newHarness(t, "testdata/policy.yaml")
	want(t, h.check("nobody", "submit_appeal", nil), refuse, yesguardv1.Reason_REASON_UNKNOWN_CALL)

	// A yes on another call never counts.
	h.say("other", transcript.Agent, "Shall I submit the appeal?")
	h.say("other", transcript.Caller, "Yes.")
	h.say("mine", transcript.Agent, "Shall I submit the appeal?")
	want(t, h.check("mine", "submit_appeal", nil), refuse, yesguardv1.Reason_REASON_NO_ANSWER)
}

func TestStaleAnswer(t *testing.T) {
	h := newHarness(t, "testdata/policy.yaml")
	old := time.Now().Add(-time.Minute)
	h.sayAt("c", transcript.Agent, "Shall I submit the appeal?", old)
	h.sayAt("c", transcript.Caller, "Yes.", old)
	want(t, h.check("c", "submit_appeal", nil), refuse, yesguardv1.Reason_REASON_STALE)
}

func TestFeedDownRefuses(t *testing.T) {
	h := newHarness(t, "testdata/policy.yaml")
	h.say("c", transcript.Agent, "Shall I submit the appeal?")
	h.say("c", transcript.Caller, "Yes.")
	h.mu.Lock()
	h.feedUp = false
	h.mu.Unlock()
	want(t, h.check("c", "submit_appeal", nil), refuse, yesguardv1.Reason_REASON_TRANSCRIPT_UNAVAILABLE)
}

func TestUnsupportedLanguage(t *testing.T) {
	h := newHarness(t, "testdata/policy.yaml")
	h.say("c", transcript.Agent, "申請を提出しますか？", withLang("ja"))
	h.say("c", transcript.Caller, "はい。", withLang("ja"))
	want(t, h.check("c", "submit_appeal", nil), refuse, yesguardv1.Reason_REASON_UNSUPPORTED_LANGUAGE)
}

func TestInterimIsNeverEvidence(t *testing.T) {
	h := newHarness(t, "testdata/policy.yaml")
	h.say("c", transcript.Agent, "Shall I submit the appeal?")
	h.sayAt("c", transcript.Caller, "Yes", time.Now(), interim())
	resp := h.check("c", "submit_appeal", nil)
	want(t, resp, refuse, yesguardv1.Reason_REASON_CALLER_SPEAKING)
}
