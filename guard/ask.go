package guard

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/yesguard/yesguard/dedupe"
	"github.com/yesguard/yesguard/internal/ask"
	"github.com/yesguard/yesguard/metrics"
	"github.com/yesguard/yesguard/patterns"
	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
	"github.com/yesguard/yesguard/transcript"
)

// The guard's own question. A REFUSE that a fresh question can mend
// carries an ask: one sentence in the call's language, stating the tool's
// bound arguments, that the pipeline speaks through its TTS as the agent's
// turn. The ask is remembered in the shared state (dedupe.Asks) for the
// action (call, tool, arguments) for ask_ttl.
//
// Rules that hold:
//   - When the agent's turn before the caller's latest words is an ask the
//     guard issued for this call, tool and arguments, received after the
//     guard issued it and before it expired (its normalised text ends the
//     turn, or the turn's response_id is the ask's id), the question rule
//     (a plain question about this action stating its values) holds by
//     construction. Rules 1 to 3 still apply: the caller's latest words,
//     their age and the race wait are the judge's as ever, and the answer
//     must be a plain yes.
//   - No ask where asking again cannot help: a negation, the caller still
//     speaking, a duplicate, and every refusal not in askReasons.
//   - A store that does not answer issues no ask and recognises none: the
//     judge's refusal stands.

// askReasons are the refusals a fresh question can mend.
var askReasons = map[yesguardv1.Reason]bool{
	yesguardv1.Reason_REASON_NO_QUESTION:        true,
	yesguardv1.Reason_REASON_QUESTION_NOT_PLAIN: true,
	yesguardv1.Reason_REASON_ACTION_MISMATCH:    true,
	yesguardv1.Reason_REASON_ARGUMENT_MISMATCH:  true,
	yesguardv1.Reason_REASON_NOT_PLAIN:          true,
	yesguardv1.Reason_REASON_AGENT_SPOKE_AFTER:  true,
	yesguardv1.Reason_REASON_EVIDENCE_USED:      true,
}

// questionReasons are the refusals of the question rule, which a
// recognised ask answers.
var questionReasons = map[yesguardv1.Reason]bool{
	yesguardv1.Reason_REASON_NO_QUESTION:        true,
	yesguardv1.Reason_REASON_QUESTION_NOT_PLAIN: true,
	yesguardv1.Reason_REASON_ACTION_MISMATCH:    true,
	yesguardv1.Reason_REASON_ARGUMENT_MISMATCH:  true,
}

// AskReasons lists the reasons whose REFUSE may carry an ask, sorted.
func AskReasons() []yesguardv1.Reason { return slices.Sorted(maps.Keys(askReasons)) }

// askSetup loads the ask locales when none are given and checks that every
// template of the policy is in a language they cover.
func askSetup(cfg *Config) error {
	if cfg.AskLocales == nil {
		set, err := ask.Load()
		if err != nil {
			return fmt.Errorf("ask locales: %w", err)
		}
		cfg.AskLocales = set
	}
	if cfg.Asks == nil {
		cfg.Asks, _ = cfg.Book.(dedupe.Asks)
	}
	return checkAskLangs(cfg.Policy, cfg.AskLocales)
}

func checkAskLangs(p *Policy, set *ask.Set) error {
	if p == nil {
		return nil
	}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(p.Tools)) {
		for _, lang := range slices.Sorted(maps.Keys(p.Tools[name].Ask)) {
			if set.Get(lang) == nil {
				errs = append(errs, fmt.Errorf("tools.%s.ask.%s: no ask locale for this language (loaded: %s)", name, lang, strings.Join(set.Langs(), ", ")))
			}
		}
	}
	return errors.Join(errs...)
}

// AskText writes the guard's question for tool with args in lang, as a
// Check would issue it: for `yesguard prompt` and tests.
func (g *Guard) AskText(tool, lang string, args map[string]any) (string, error) {
	rs := g.rules.Load()
	return g.cfg.AskLocales.Render(askTool(rs.tool(tool)), lang, args)
}

// AskLocales returns the loaded ask locales.
func (g *Guard) AskLocales() *ask.Set { return g.cfg.AskLocales }

func (c *check) askKey() dedupe.Key {
	return dedupe.Key{CallID: c.req.CallID, Tool: c.req.Tool, ArgsHash: c.req.ArgsHash}
}

// offerAsk issues the guard's question on a REFUSE that one can mend, and
// tells the model about it.
func (c *check) offerAsk(ctx context.Context) {
	v := c.v
	if v.Outcome != yesguardv1.Outcome_OUTCOME_REFUSE || !askReasons[v.Reason] || c.g.cfg.Asks == nil || c.req.ArgsHash == "" || !c.tool.confirm() {
		return
	}
	lang := c.lang()
	args := make(map[string]any, len(c.args))
	for k, a := range c.args {
		args[k] = a.AsInterface()
	}
	text, err := c.g.cfg.AskLocales.Render(askTool(c.tool), lang, args)
	if err != nil {
		c.g.cfg.Logger.Debug("no guard question for this refusal", zap.String("tool", c.tool.name), zap.String("lang", lang), zap.Error(err))
		c.g.asks.WithLabelValues(metrics.AskUnwritten).Inc()
		return
	}
	now := c.g.now()
	a := dedupe.Ask{ID: "ask_" + ulid.Make().String(), Text: text, Norm: ask.Normalise(text), Lang: lang, Issued: now,
		Expires: now.Add(c.rs.policy.Defaults.AskTTL.D())}
	if err := c.g.cfg.Asks.IssueAsk(ctx, c.askKey(), a); err != nil {
		c.g.cfg.Logger.Warn("the guard's question could not be remembered; refusing without one", zap.Error(err), zap.String("decision_id", v.DecisionID))
		c.g.asks.WithLabelValues(metrics.AskUnremembered).Inc()
		return
	}
	c.g.asks.WithLabelValues(metrics.AskIssued).Inc()
	v.Ask = &yesguardv1.Ask{Text: a.Text, Lang: a.Lang, Id: a.ID, ExpiresAt: timestamppb.New(a.Expires)}
	// The message tells the model the guard's own question instead of an
	// example of its own making: one question, the same the guard knows.
	v.Message = "The caller's words are not yet consent to this action (" + strings.ToLower(strings.TrimPrefix(v.Reason.String(), "REASON_")) +
		"). The guard's own question is " + strconv.Quote(a.Text) +
		": if the pipeline speaks it for you, do not ask again; else say exactly that to the caller. Then wait for the caller's answer, and call " +
		c.tool.name + " again with the same arguments only if they say yes."
}

// recognise lets a guard's question stand as the question the caller's
// latest words answer. j is the judge's verdict on v.
func (c *check) recognise(ctx context.Context, v view, j judgement) judgement {
	if c.g.cfg.Asks == nil || (j.outcome != yesguardv1.Outcome_OUTCOME_ALLOW && !questionReasons[j.reason]) {
		return j
	}
	n := len(v.turns)
	if n < 2 || v.turns[n-1].Speaker != transcript.Caller || v.turns[n-2].Speaker != transcript.Agent {
		return j
	}
	q, answer := v.turns[n-2], v.turns[n-1]
	now := c.g.now()
	asks, err := c.g.cfg.Asks.AsksFor(ctx, c.askKey(), now)
	if err != nil {
		c.g.cfg.Logger.Warn("the guard's questions could not be read; judging without them", zap.Error(err), zap.String("decision_id", c.v.DecisionID))
		c.g.asks.WithLabelValues(metrics.AskUnread).Inc()
		return j
	}
	a, ok := matchAsk(asks, q, now)
	if !ok {
		return j
	}
	ev := j.evidence
	ev.GuardQuestion = a.ID
	c.g.asks.WithLabelValues(metrics.AskRecognised).Inc()
	if j.outcome == yesguardv1.Outcome_OUTCOME_ALLOW {
		return j
	}
	// Rule 3: the caller's words must be a plain yes.
	loc := c.rs.locales.Get(ev.GetLang())
	if loc == nil {
		return j
	}
	action := c.rs.patternsTool(c.tool, loc).Action
	echo := patterns.TokenSet(loc.Parse(a.Text))
	ans := loc.JudgeAnswer(loc.Parse(answer.Text), action, echo)
	ev.QuestionSentence = a.Text
	ev.Matches = append(ev.Matches, matchProtos(ans.Matches)...)
	switch {
	case ans.Negated:
		j.reason, ev.Detail = yesguardv1.Reason_REASON_NEGATED, ans.Detail
	case ans.NotPlain || (!ans.Affirmative && !ans.Verb):
		j.reason, ev.Detail = yesguardv1.Reason_REASON_NOT_PLAIN, ans.Detail
	default:
		j.outcome, j.reason, j.turnID = yesguardv1.Outcome_OUTCOME_ALLOW, yesguardv1.Reason_REASON_CONFIRMED, answer.ID
		ev.Detail = "plain yes " + strconv.Quote(Clip(answer.Text, 120)) + " to the guard's question " + strconv.Quote(a.Text) + " (" + a.ID + ")"
	}
	if ev.Detail == "" {
		ev.Detail = "the caller's answer to the guard's question is not a plain yes"
	}
	return j
}

// matchAsk finds the ask q speaks: one received after the ask was issued
// and before it expired, whose id q carries as its response id or whose
// normalised text ends q's.
func matchAsk(asks []dedupe.Ask, q transcript.Turn, now time.Time) (dedupe.Ask, bool) {
	text := " " + ask.Normalise(q.Text)
	for i := len(asks) - 1; i >= 0; i-- {
		a := asks[i]
		if !now.Before(a.Expires) || q.ReceivedAt.Before(a.Issued) || !q.ReceivedAt.Before(a.Expires) {
			continue
		}
		if (q.ResponseID != "" && q.ResponseID == a.ID) || (a.Norm != "" && strings.HasSuffix(text, " "+a.Norm)) {
			return a, true
		}
	}
	return dedupe.Ask{}, false
}
