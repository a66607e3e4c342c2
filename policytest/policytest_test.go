package policytest

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExampleFilePasses: the shipped example tests pass against the
// example policy they name.
func TestExampleFilePasses(t *testing.T) {
	f, err := Load("../policy.example.test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), f, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(res.Policy, "policy.example.yaml") {
		t.Errorf("ran under %q, want the file's policy.example.yaml", res.Policy)
	}
	if len(res.Tests) != len(f.Tests) || len(res.Tests) < 10 {
		t.Fatalf("%d of %d tests ran", len(res.Tests), len(f.Tests))
	}
	var out bytes.Buffer
	Text(&out, []*Result{res}, true)
	if res.Failed() > 0 {
		t.Fatalf("%d failed:\n%s", res.Failed(), out.String())
	}
	if !strings.Contains(out.String(), "--- PASS: yes then no is refused") || !strings.HasPrefix(lastLine(out.String()), "ok  \t") {
		t.Errorf("verbose output:\n%s", out.String())
	}
	// A raced test waited for its late turn, and that turn is the answer.
	for _, tr := range res.Tests {
		if tr.Name == "yes then no is refused" && tr.Steps[0].Got.GetEvidence().GetAnswer().GetText() != "Yes. Wait, no." {
			t.Errorf("raced test judged %q", tr.Steps[0].Got.GetEvidence().GetAnswer().GetText())
		}
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// TestWrongExpectationFails: a test whose expectation is wrong fails, with
// a diff of want against got and the decision's evidence.
func TestWrongExpectationFails(t *testing.T) {
	dir := t.TempDir()
	policy, _ := os.ReadFile("../policy.example.yaml")
	if err := os.WriteFile(filepath.Join(dir, "p.yaml"), policy, 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "wrong.test.yaml")
	if err := os.WriteFile(path, []byte(`policy: p.yaml
tests:
  - name: yes then no
    turns:
      - agent: Shall I submit your appeal now?
      - caller: Yes. Wait, no.
    race: true
    tool: submit_appeal
    args: {appeal_id: A-17}
    want: allow
    reason: confirmed
  - name: an announcement
    turns:
      - agent: I will now submit the request.
      - caller: Okay.
    tool: submit_appeal
    want: refuse
`), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), f, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed() != 1 || res.Tests[0].Pass || !res.Tests[1].Pass {
		t.Fatalf("failed %d, want the first test only", res.Failed())
	}
	var out bytes.Buffer
	Text(&out, []*Result{res}, false)
	for _, want := range []string{
		"--- FAIL: yes then no",
		"wrong.test.yaml:3: submit_appeal {\"appeal_id\":\"A-17\"}",
		"- outcome: allow", "+ outcome: refuse",
		"- reason:  confirmed", "+ reason:  negated",
		`answer:   "Yes. Wait, no."`,
		`negation "wait"`,
		"message:  The caller said no",
		"FAIL\t" + path,
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "an announcement") {
		t.Errorf("a passing test is listed without -v:\n%s", out.String())
	}
	var js bytes.Buffer
	if err := JSON(&js, []*Result{res}, nil); err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Passed, Failed int
		Files          []struct {
			Tests []struct {
				Steps []struct {
					Got  struct{ Outcome, Reason string }
					Diff []string
				}
			}
		}
	}
	if err := json.Unmarshal(js.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Passed != 1 || rep.Failed != 1 || rep.Files[0].Tests[0].Steps[0].Got.Reason != "negated" || len(rep.Files[0].Tests[0].Steps[0].Diff) == 0 {
		t.Errorf("JSON report: %s", js.String())
	}
}

// TestParseErrors: every problem of a file is reported with its line.
func TestParseErrors(t *testing.T) {
	_, err := Parse([]byte(`tests:
  - name: a
    turns:
      - agent: Shall I?
      - callr: yes
    tool: t
    want: maybe
  - name: b
    tool: t
    want: refuse
    reason: nope
  - name: c
    turns:
      - caller: yes
      - caller: yes
    race: true
    tool: t
    want: allow
  - name: a
    tool: t
    want: allow
    colour: red
`), "x.test.yaml")
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		"x.test.yaml:5:", "callr",
		"x.test.yaml:2: test \"a\": want: \"maybe\"",
		"x.test.yaml:8: test \"b\": reason: \"nope\" is not a reason",
		"x.test.yaml:12: test \"c\": race: the turn before the late one must be the agent's",
		"x.test.yaml:22:", "colour",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

// A mistyped key is named with the keys allowed where it stands, on its
// own line, in the file's words: no Go type names.
func TestParseUnknownKeys(t *testing.T) {
	for _, tc := range []struct{ name, file, want string }{
		{"in a turn", "tests:\n  - name: a\n    turns:\n      - agent: Shall I?\n      - caler: yes\n    tool: t\n    want: allow\n",
			`x.test.yaml:5: unknown key "caler"; the keys allowed here are agent, caller, lang, start_ms, end_ms, response_id, interim, age`},
		{"in a test", "tests:\n  - name: a\n    tool: t\n    want: allow\n    colour: red\n",
			`x.test.yaml:5: unknown key "colour"; the keys allowed here are name, steps, turns, race, tool, args, response_id, responding_to_ms, want, reason, detail`},
		{"at the top", "polcy: p.yaml\ntests: []\n",
			`x.test.yaml: line 1: unknown key "polcy"; the keys allowed here are policy, locales_dir, tests`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.file), "x.test.yaml")
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "YAML") || strings.Contains(err.Error(), "policytest.") {
				t.Errorf("error %v\nwant it to hold %q and no Go type names", err, tc.want)
			}
		})
	}
}
