package policytest

import (
	"context"
	"fmt"
	"regexp"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/yesguard/yesguard/approval"
	"github.com/yesguard/yesguard/guard"
	"github.com/yesguard/yesguard/internal/inproc"
	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
	"github.com/yesguard/yesguard/transcript"
)

// Options adjust a run.
type Options struct {
	// Policy and LocalesDir, when set, replace the file's.
	Policy, LocalesDir string
	// Run, when set, runs only the tests whose name it matches.
	Run *regexp.Regexp
}

// Result is one file's run.
type Result struct {
	File          string
	Policy        string // "" is the default policy
	PolicyVersion string
	Tests         []TestResult
	Duration      time.Duration
}

// Failed counts the tests that did not pass.
func (r *Result) Failed() int {
	n := 0
	for _, t := range r.Tests {
		if !t.Pass {
			n++
		}
	}
	return n
}

// TestResult is one test's.
type TestResult struct {
	Name     string
	Line     int
	Pass     bool
	Steps    []StepResult
	Duration time.Duration
}

// StepResult is one tool call's: what the test wanted and what the engine
// decided.
type StepResult struct {
	Step
	Pass bool
	Got  *guard.Verdict
	// ArgsJSON is the arguments as the engine canonicalises them.
	ArgsJSON string
}

// Run runs the file's tests through one engine built from its policy and
// locales. The error is the policy's or the locales' (no test ran).
func Run(ctx context.Context, f *File, o Options) (*Result, error) {
	policy, locales := f.Policy, f.LocalesDir
	if o.Policy != "" {
		policy = o.Policy
	}
	if o.LocalesDir != "" {
		locales = o.LocalesDir
	}
	r := &runner{}
	eng, err := inproc.New(policy, locales, inproc.Options{Feed: r.feed})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Path, err)
	}
	r.eng = eng
	res := &Result{File: f.Path, Policy: policy, PolicyVersion: eng.Guard.PolicyVersion()}
	start := time.Now()
	for i, t := range f.Tests {
		if o.Run != nil && !o.Run.MatchString(t.Name) {
			continue
		}
		res.Tests = append(res.Tests, r.test(ctx, fmt.Sprintf("test-%d", i+1), t))
	}
	res.Duration = time.Since(start)
	return res, nil
}

// runner plays tests on one engine. It runs one Check at a time.
type runner struct {
	eng *inproc.Engine
	seq uint64
	// started, when set, receives a signal when the engine first asks for
	// the feed's state in the Check under way: the Check is in flight.
	started atomic.Pointer[chan struct{}]
}

// feed is the engine's feed: always live; it also tells the runner that a
// Check has started.
func (r *runner) feed() (guard.FeedState, string) {
	if ch := r.started.Load(); ch != nil {
		select {
		case *ch <- struct{}{}:
		default: // signalled already
		}
	}
	return guard.FeedLive, ""
}

func (r *runner) test(ctx context.Context, call string, t Test) TestResult {
	start := time.Now()
	tr := TestResult{Name: t.Name, Line: t.Line, Pass: true}
	for _, s := range t.Steps {
		sr := r.step(ctx, call, s)
		tr.Steps = append(tr.Steps, sr)
		if !sr.Pass {
			tr.Pass = false
			break // later steps build on this one
		}
	}
	tr.Duration = time.Since(start)
	return tr
}

func (r *runner) apply(call string, t Turn, now time.Time) error {
	r.seq++
	ev := transcript.Event{
		CallID: call, Seq: r.seq, Speaker: transcript.Speaker(t.Speaker), Type: transcript.TypeTranscript,
		Text: t.Text, Final: !t.Interim, StartMS: t.StartMS, EndMS: t.EndMS, Lang: t.Lang, ResponseID: t.ResponseID,
	}
	if ok, why := r.eng.Store.Apply(ev, now.Add(-t.Age)); !ok {
		return fmt.Errorf("line %d: the turn was dropped (%s)", t.Line, why)
	}
	return nil
}

func (r *runner) step(ctx context.Context, call string, s Step) StepResult {
	sr := StepResult{Step: s}
	fail := func(err error) StepResult {
		sr.Got = &guard.Verdict{Outcome: yesguardv1.Outcome_OUTCOME_UNSPECIFIED, Evidence: &yesguardv1.Evidence{Detail: err.Error()}}
		return sr
	}
	turns := s.Turns
	var late *Turn
	if s.Race {
		late, turns = &turns[len(turns)-1], turns[:len(turns)-1]
	}
	now := time.Now()
	for _, t := range turns {
		if err := r.apply(call, t, now); err != nil {
			return fail(err)
		}
	}
	args, err := structpb.NewStruct(s.Args)
	if err != nil {
		return fail(fmt.Errorf("args: %w", err))
	}
	if b, err := approval.CanonicalArgs(args); err == nil {
		sr.ArgsJSON = string(b)
	}

	started := make(chan struct{}, 1)
	r.started.Store(&started)
	defer r.started.Store(nil)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan *guard.Verdict, 1)
	go func() {
		done <- r.eng.Guard.Check(cctx, guard.Request{
			CallID: call, Tool: s.Tool, Args: args, ResponseID: s.ResponseID, RespondingToMS: s.RespondingToMS,
		})
	}()
	var v *guard.Verdict
	select {
	case <-started:
		if late != nil {
			if err := r.apply(call, *late, time.Now()); err != nil {
				cancel()
				<-done
				return fail(err)
			}
		}
		// Every turn is in: end the wait as its timeout would.
		cancel()
		v = <-done
	case v = <-done:
		// Judged without asking for the feed (a repeat known at once).
	}
	sr.Got = v
	sr.Pass = v.GetOutcome() == s.Want &&
		(s.Reason == yesguardv1.Reason_REASON_UNSPECIFIED || v.GetReason() == s.Reason) &&
		(s.Detail == "" || contains(v.GetEvidence().GetDetail(), s.Detail))
	return sr
}
