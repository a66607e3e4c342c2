package policytest

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
)

func contains(s, sub string) bool { return strings.Contains(strings.ToLower(s), strings.ToLower(sub)) }

func outcomeName(o yesguardv1.Outcome) string {
	if o == yesguardv1.Outcome_OUTCOME_UNSPECIFIED {
		return "error"
	}
	return strings.ToLower(strings.TrimPrefix(o.String(), "OUTCOME_"))
}

func reasonName(r yesguardv1.Reason) string {
	return strings.ToLower(strings.TrimPrefix(r.String(), "REASON_"))
}

// Diff is the step's expectation against its decision, field by field,
// as a unified diff reads: "-" what the test wants, "+" what the engine
// decided, " " what agrees.
func (s StepResult) Diff() []string {
	var out []string
	line := func(field, want, got string, asked bool) {
		switch {
		case !asked:
			out = append(out, fmt.Sprintf("  %-8s %s", field+":", got))
		case want == got:
			out = append(out, fmt.Sprintf("  %-8s %s", field+":", got))
		default:
			out = append(out, fmt.Sprintf("- %-8s %s", field+":", want), fmt.Sprintf("+ %-8s %s", field+":", got))
		}
	}
	v := s.Got
	line("outcome", outcomeName(s.Want), outcomeName(v.GetOutcome()), true)
	line("reason", reasonName(s.Reason), reasonName(v.GetReason()), s.Reason != yesguardv1.Reason_REASON_UNSPECIFIED)
	detail := v.GetEvidence().GetDetail()
	if s.Detail != "" && !contains(detail, s.Detail) {
		out = append(out, fmt.Sprintf("- %-8s …%s…", "detail:", s.Detail), fmt.Sprintf("+ %-8s %s", "detail:", detail))
	} else {
		line("detail", "", detail, false)
	}
	return out
}

// Text writes results as `go test` does: each failure with its diff, the
// decision's evidence and the message to the model; with verbose every
// test's === RUN and --- PASS too; then ok or FAIL per file.
func Text(w io.Writer, results []*Result, verbose bool) {
	for _, r := range results {
		for _, t := range r.Tests {
			if verbose {
				fmt.Fprintf(w, "=== RUN   %s\n", t.Name)
			}
			if t.Pass {
				if verbose {
					fmt.Fprintf(w, "--- PASS: %s (%.2fs)\n", t.Name, t.Duration.Seconds())
				}
				continue
			}
			fmt.Fprintf(w, "--- FAIL: %s (%.2fs)\n", t.Name, t.Duration.Seconds())
			for i, s := range t.Steps {
				if s.Pass {
					continue
				}
				writeFailure(w, r.File, len(t.Steps) > 1, i, s)
			}
		}
		status := "ok  "
		if r.Failed() > 0 {
			status = "FAIL"
		}
		policy := r.Policy
		if policy == "" {
			policy = "default policy"
		}
		fmt.Fprintf(w, "%s\t%s\t%.3fs\t(%d tests, policy %s)\n", status, r.File, r.Duration.Seconds(), len(r.Tests), policy)
	}
}

func writeFailure(w io.Writer, file string, steps bool, i int, s StepResult) {
	const in = "    "
	where := fmt.Sprintf("%s:%d", file, s.Line)
	if steps {
		where += fmt.Sprintf(" (step %d)", i+1)
	}
	call := s.Tool
	if s.ArgsJSON != "" && s.ArgsJSON != "{}" {
		call += " " + s.ArgsJSON
	}
	fmt.Fprintf(w, "%s%s: %s\n", in, where, call)
	fmt.Fprintf(w, "%s--- want\n%s+++ got\n", in, in)
	for _, l := range s.Diff() {
		fmt.Fprintf(w, "%s%s\n", in, l)
	}
	ev := s.Got.GetEvidence()
	if q := ev.GetQuestion(); q != nil {
		fmt.Fprintf(w, "%squestion: %q (the sentence taken: %q)\n", in, q.GetText(), ev.GetQuestionSentence())
	}
	if a := ev.GetAnswer(); a != nil {
		fmt.Fprintf(w, "%sanswer:   %q\n", in, a.GetText())
	}
	if ms := ev.GetMatches(); len(ms) > 0 {
		parts := make([]string, 0, len(ms))
		for _, m := range ms {
			p := m.GetRule()
			if m.GetPattern() != "" {
				p += " " + strconvQuote(m.GetPattern())
			}
			if m.GetText() != "" && m.GetText() != m.GetPattern() {
				p += " in " + strconvQuote(m.GetText())
			}
			parts = append(parts, p)
		}
		fmt.Fprintf(w, "%smatched:  %s\n", in, strings.Join(parts, "; "))
	}
	if l := ev.GetLang(); l != "" {
		fmt.Fprintf(w, "%slang:     %s\n", in, l)
	}
	if msg := s.Got.GetMessage(); msg != "" {
		fmt.Fprintf(w, "%smessage:  %s\n", in, msg)
	}
}

func strconvQuote(s string) string { b, _ := json.Marshal(s); return string(b) }

// The JSON report's shapes.
type jsonReport struct {
	Passed int        `json:"passed"`
	Failed int        `json:"failed"`
	Files  []jsonFile `json:"files"`
}

type jsonFile struct {
	File          string     `json:"file"`
	Policy        string     `json:"policy"`
	PolicyVersion string     `json:"policy_version"`
	Pass          bool       `json:"pass"`
	Error         string     `json:"error,omitempty"`
	DurationMS    int64      `json:"duration_ms"`
	Tests         []jsonTest `json:"tests"`
}

type jsonTest struct {
	Name  string     `json:"name"`
	Line  int        `json:"line"`
	Pass  bool       `json:"pass"`
	Steps []jsonStep `json:"steps"`
}

type jsonStep struct {
	Line int          `json:"line"`
	Tool string       `json:"tool"`
	Args string       `json:"args"`
	Pass bool         `json:"pass"`
	Want jsonDecision `json:"want"`
	Got  jsonDecision `json:"got"`
	Diff []string     `json:"diff,omitempty"`
}

type jsonDecision struct {
	Outcome          string      `json:"outcome"`
	Reason           string      `json:"reason,omitempty"`
	Detail           string      `json:"detail,omitempty"`
	Message          string      `json:"message,omitempty"`
	QuestionSentence string      `json:"question_sentence,omitempty"`
	Answer           string      `json:"answer,omitempty"`
	Matches          []jsonMatch `json:"matches,omitempty"`
	WaitedMS         int64       `json:"waited_ms,omitempty"`
}

type jsonMatch struct {
	Rule    string `json:"rule"`
	Pattern string `json:"pattern,omitempty"`
	Text    string `json:"text,omitempty"`
}

// FileError is a file that did not load or whose policy did not.
type FileError struct {
	File string
	Err  error
}

// JSON writes one JSON document of every file's results (and of the files
// that did not load).
func JSON(w io.Writer, results []*Result, errs []FileError) error {
	rep := jsonReport{Files: []jsonFile{}}
	for _, e := range errs {
		rep.Files = append(rep.Files, jsonFile{File: e.File, Error: e.Err.Error(), Tests: []jsonTest{}})
	}
	for _, r := range results {
		jf := jsonFile{File: r.File, Policy: r.Policy, PolicyVersion: r.PolicyVersion, Pass: r.Failed() == 0, DurationMS: r.Duration.Milliseconds(), Tests: []jsonTest{}}
		for _, t := range r.Tests {
			jt := jsonTest{Name: t.Name, Line: t.Line, Pass: t.Pass}
			if t.Pass {
				rep.Passed++
			} else {
				rep.Failed++
			}
			for _, s := range t.Steps {
				js := jsonStep{Line: s.Line, Tool: s.Tool, Args: s.ArgsJSON, Pass: s.Pass,
					Want: jsonDecision{Outcome: outcomeName(s.Want), Detail: s.Detail},
					Got:  decisionJSON(s)}
				if s.Reason != yesguardv1.Reason_REASON_UNSPECIFIED {
					js.Want.Reason = reasonName(s.Reason)
				}
				if !s.Pass {
					js.Diff = s.Diff()
				}
				jt.Steps = append(jt.Steps, js)
			}
			jf.Tests = append(jf.Tests, jt)
		}
		rep.Files = append(rep.Files, jf)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

func decisionJSON(s StepResult) jsonDecision {
	v := s.Got
	ev := v.GetEvidence()
	d := jsonDecision{
		Outcome: outcomeName(v.GetOutcome()), Reason: reasonName(v.GetReason()), Detail: ev.GetDetail(), Message: v.GetMessage(),
		QuestionSentence: ev.GetQuestionSentence(), Answer: ev.GetAnswer().GetText(), WaitedMS: v.GetWaitedMs(),
	}
	for _, m := range ev.GetMatches() {
		d.Matches = append(d.Matches, jsonMatch{Rule: m.GetRule(), Pattern: m.GetPattern(), Text: m.GetText()})
	}
	return d
}
