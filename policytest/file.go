// Package policytest runs dialogue tests: YAML files in which a team that
// tunes yesguard for its own pipeline writes how its agent and callers
// speak, the tool call the model makes, and the decision it expects, then
// checks them against its own policy and locales with `yesguard test`,
// as `opa test` checks a Rego policy.
//
// A file names its policy and holds its tests:
//
//	policy: policy.example.yaml     # relative to this file; "" is the default policy
//	locales_dir: locales/           # optional: <lang>.yaml over the built-in locales
//	tests:
//	  - name: a plain yes to the appeal question is allowed
//	    turns:
//	      - agent: Shall I submit your appeal now?
//	      - caller: Yes, please.
//	    race: true                  # the last turn lands after the Check starts
//	    tool: submit_appeal
//	    args: {appeal_id: A-17}
//	    want: allow                 # allow, refuse, duplicate or ignored
//	    reason: confirmed           # optional: the reason the decision must carry
//
// A turn is {agent: text} or {caller: text}, with optional lang, start_ms
// and end_ms (audio time), response_id, interim (a caller result still in
// flight, not final) and age (how long before the Check it arrived: "40s"
// makes a yes STALE under the default policy). A test of several tool
// calls on one call lists steps, each with its own turns, tool, args and
// expectation.
//
// Rules that hold:
//   - Tests run in process through the engine (package guard) with no NATS
//     and no gRPC, on a transcript store and a memory book of their own,
//     under the policy's rules and its wait. Each test is its own call.
//   - race plays the tool call outrunning the transcript, as the corpus
//     tests do: the Check starts, and once the engine holds it in flight
//     (it has asked for the feed's state: no sleep, no polling) the last
//     turn lands. Then the wait is ended, as its timeout would end it, so
//     that the Check is judged on exactly the turns given and a suite
//     never waits out the policy's wait in real time.
//   - A file that does not parse, names an unknown field, outcome or
//     reason, or a policy that does not load, is an error with its file
//     and line; it never passes.
package policytest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
)

// File is one parsed test file.
type File struct {
	// Path is where it was read from.
	Path string
	// Policy and LocalesDir are resolved against the file's directory;
	// an empty Policy is the default policy.
	Policy     string
	LocalesDir string
	Tests      []Test
}

// Test is one dialogue test: one call, one or more steps.
type Test struct {
	Name  string
	Line  int
	Steps []Step
}

// Step is the turns before a tool call, the call, and what it must get.
type Step struct {
	Line           int
	Turns          []Turn
	Race           bool
	Tool           string
	Args           map[string]any
	ResponseID     string
	RespondingToMS int64
	Want           yesguardv1.Outcome
	// Reason, when not unspecified, must be the decision's.
	Reason yesguardv1.Reason
	// Detail, when not empty, must be in the decision's detail.
	Detail string
}

// Turn is one transcript event to apply.
type Turn struct {
	Line       int
	Speaker    string // "agent" or "caller"
	Text       string
	Lang       string
	StartMS    *int64
	EndMS      *int64
	ResponseID string
	Interim    bool
	// Age is how long before the step's Check the turn arrived.
	Age time.Duration
}

// The YAML shapes.
type fileYAML struct {
	Policy     string      `yaml:"policy"`
	LocalesDir string      `yaml:"locales_dir"`
	Tests      []yaml.Node `yaml:"tests"`
}

type stepYAML struct {
	Turns          []yaml.Node    `yaml:"turns"`
	Race           bool           `yaml:"race"`
	Tool           string         `yaml:"tool"`
	Args           map[string]any `yaml:"args"`
	ResponseID     string         `yaml:"response_id"`
	RespondingToMS int64          `yaml:"responding_to_ms"`
	Want           string         `yaml:"want"`
	Reason         string         `yaml:"reason"`
	Detail         string         `yaml:"detail"`
}

type testYAML struct {
	Name     string      `yaml:"name"`
	Steps    []yaml.Node `yaml:"steps"`
	stepYAML `yaml:",inline"`
}

type turnYAML struct {
	Agent      string `yaml:"agent"`
	Caller     string `yaml:"caller"`
	Lang       string `yaml:"lang"`
	StartMS    *int64 `yaml:"start_ms"`
	EndMS      *int64 `yaml:"end_ms"`
	ResponseID string `yaml:"response_id"`
	Interim    bool   `yaml:"interim"`
	Age        string `yaml:"age"`
}

// maxFileBytes bounds a test file.
const maxFileBytes = 8 << 20

// Load reads and checks a test file.
func Load(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f, err := Parse(data, path)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(path)
	if f.Policy != "" && !filepath.IsAbs(f.Policy) {
		f.Policy = filepath.Join(dir, f.Policy)
	}
	if f.LocalesDir != "" && !filepath.IsAbs(f.LocalesDir) {
		f.LocalesDir = filepath.Join(dir, f.LocalesDir)
	}
	return f, nil
}

// Parse parses a test file's contents; name names it in errors. Every
// problem is reported at once, each as name:line: what is wrong.
func Parse(data []byte, name string) (*File, error) {
	if len(data) > maxFileBytes {
		return nil, fmt.Errorf("%s: %d bytes; a test file holds at most %d", name, len(data), maxFileBytes)
	}
	p := &parser{name: name}
	var raw fileYAML
	if err := strictDecode(data, &raw); err != nil {
		var msgs []string
		for _, pr := range yamlProblems(err, &raw, nil) {
			msgs = append(msgs, pr.msg)
		}
		return nil, fmt.Errorf("%s: %s", name, strings.Join(msgs, "; "))
	}
	f := &File{Path: name, Policy: raw.Policy, LocalesDir: raw.LocalesDir}
	if len(raw.Tests) == 0 {
		return nil, fmt.Errorf("%s: no tests: want a tests: list", name)
	}
	names := map[string]int{}
	for i := range raw.Tests {
		if t, ok := p.test(&raw.Tests[i], i); ok {
			if first, dup := names[t.Name]; dup {
				p.errf(t.Line, "test %q: the same name as the test on line %d", t.Name, first)
			}
			names[t.Name] = t.Line
			f.Tests = append(f.Tests, t)
		}
	}
	if err := errors.Join(p.errs...); err != nil {
		return nil, err
	}
	return f, nil
}

// strictDecode decodes YAML, refusing unknown fields.
func strictDecode(data []byte, v any) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	return dec.Decode(v)
}

type parser struct {
	name string
	errs []error
}

func (p *parser) errf(line int, format string, args ...any) {
	p.errs = append(p.errs, fmt.Errorf("%s:%d: %s", p.name, line, fmt.Sprintf(format, args...)))
}

// decodeNode decodes n, refusing unknown fields. yaml.Node.Decode knows
// no KnownFields, so the node is first checked on a copy decoded strictly;
// then decoded itself, so that the nodes inside keep their lines in the
// file.
func (p *parser) decodeNode(n *yaml.Node, v any) bool {
	b, err := yaml.Marshal(n)
	if err == nil {
		err = strictDecode(b, v)
	}
	if err == nil {
		err = n.Decode(v)
	}
	if err != nil {
		for _, pr := range yamlProblems(err, v, n) {
			p.errf(pr.line, "%s", pr.msg)
		}
		return false
	}
	return true
}

// unknownKey is how the YAML decoder names a key no field takes.
var unknownKey = regexp.MustCompile(`^field (\S+) not found in type \S+$`)

// yamlProblem is one thing the YAML decoder found wrong, on a line of
// the file.
type yamlProblem struct {
	line int
	msg  string
}

// yamlProblems says what the decoder's err found wrong in v's YAML, in
// the file's terms: an unknown key is named with the keys allowed there,
// never Go's type names. Inside node n, each is on n's line (an unknown
// key on its own); the decoder's lines are dropped, as they count in a
// copy of the node. Without n, the decoder's lines stay in the message.
func yamlProblems(err error, v any, n *yaml.Node) []yamlProblem {
	msg := err.Error()
	for _, prefix := range []string{"yaml: unmarshal errors:\n", "yaml: "} {
		msg = strings.TrimPrefix(msg, prefix)
	}
	var out []yamlProblem
	for _, text := range strings.Split(msg, "\n") {
		text = strings.TrimSpace(text)
		where := ""
		if strings.HasPrefix(text, "line ") {
			if i := strings.Index(text, ": "); i >= 0 {
				where, text = text[:i]+": ", text[i+2:]
			}
		}
		pr := yamlProblem{msg: where + text}
		if n != nil {
			pr = yamlProblem{line: n.Line, msg: text}
		}
		if m := unknownKey.FindStringSubmatch(text); m != nil {
			pr.msg = fmt.Sprintf("unknown key %q; the keys allowed here are %s", m[1], strings.Join(yamlKeys(reflect.TypeOf(v)), ", "))
			if n == nil {
				pr.msg = where + pr.msg
			} else if k := keyNode(n, m[1]); k != nil {
				pr.line = k.Line
			}
		}
		out = append(out, pr)
	}
	return out
}

// yamlKeys lists the YAML keys of struct type t (a pointer's element),
// those of its inline structs in their place.
func yamlKeys(t reflect.Type) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var keys []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch {
		case opts == "inline":
			keys = append(keys, yamlKeys(f.Type)...)
		case name != "" && name != "-":
			keys = append(keys, name)
		}
	}
	return keys
}

// keyNode is the key node named key of mapping node n, or nil.
func keyNode(n *yaml.Node, key string) *yaml.Node {
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i]
		}
	}
	return nil
}

func (p *parser) test(n *yaml.Node, i int) (Test, bool) {
	var raw testYAML
	if !p.decodeNode(n, &raw) {
		return Test{}, false
	}
	t := Test{Name: strings.TrimSpace(raw.Name), Line: n.Line}
	if t.Name == "" {
		p.errf(n.Line, "tests[%d]: name: required", i)
		return t, false
	}
	single := raw.Tool != "" || raw.Want != "" || len(raw.Turns) > 0
	switch {
	case single && len(raw.Steps) > 0:
		p.errf(n.Line, "test %q: give either steps or one step's turns, tool and want, not both", t.Name)
		return t, false
	case single:
		if s, ok := p.step(t.Name, &raw.stepYAML, n.Line); ok {
			t.Steps = append(t.Steps, s)
		}
	case len(raw.Steps) == 0:
		p.errf(n.Line, "test %q: no tool call: want turns, tool and want (or steps)", t.Name)
		return t, false
	}
	for j := range raw.Steps {
		var sy stepYAML
		if !p.decodeNode(&raw.Steps[j], &sy) {
			continue
		}
		if s, ok := p.step(fmt.Sprintf("%s, step %d", t.Name, j+1), &sy, raw.Steps[j].Line); ok {
			t.Steps = append(t.Steps, s)
		}
	}
	return t, len(t.Steps) > 0
}

func (p *parser) step(name string, raw *stepYAML, line int) (Step, bool) {
	s := Step{Line: line, Race: raw.Race, Tool: raw.Tool, Args: raw.Args, ResponseID: raw.ResponseID, RespondingToMS: raw.RespondingToMS, Detail: raw.Detail}
	ok := true
	if s.Tool == "" {
		p.errf(line, "test %q: tool: required", name)
		ok = false
	}
	var err error
	if s.Want, err = ParseOutcome(raw.Want); err != nil {
		p.errf(line, "test %q: want: %v", name, err)
		ok = false
	}
	if raw.Reason != "" {
		if s.Reason, err = ParseReason(raw.Reason); err != nil {
			p.errf(line, "test %q: reason: %v", name, err)
			ok = false
		}
	}
	for i := range raw.Turns {
		t, tok := p.turn(name, &raw.Turns[i])
		ok = ok && tok
		s.Turns = append(s.Turns, t)
	}
	if s.Race && ok {
		// The Check must not be ready before the late turn lands, or the
		// outcome would depend on which came first.
		n := len(s.Turns)
		switch {
		case n == 0 || s.Turns[n-1].Speaker != "caller":
			p.errf(line, "test %q: race: the last turn must be the caller's (it is the one that lands after the Check)", name)
			ok = false
		case n >= 2 && s.Turns[n-2].Speaker != "agent":
			p.errf(line, "test %q: race: the turn before the late one must be the agent's, or the Check could be judged before it lands", name)
			ok = false
		}
	}
	return s, ok
}

func (p *parser) turn(name string, n *yaml.Node) (Turn, bool) {
	var raw turnYAML
	if !p.decodeNode(n, &raw) {
		return Turn{}, false
	}
	t := Turn{Line: n.Line, Lang: raw.Lang, StartMS: raw.StartMS, EndMS: raw.EndMS, ResponseID: raw.ResponseID, Interim: raw.Interim}
	switch {
	case raw.Agent != "" && raw.Caller == "":
		t.Speaker, t.Text = "agent", raw.Agent
	case raw.Caller != "" && raw.Agent == "":
		t.Speaker, t.Text = "caller", raw.Caller
	default:
		p.errf(n.Line, "test %q: a turn is {agent: text} or {caller: text}", name)
		return t, false
	}
	if t.Interim && t.Speaker != "caller" {
		p.errf(n.Line, "test %q: interim: only a caller's result can be in flight", name)
		return t, false
	}
	if raw.Age != "" {
		d, err := time.ParseDuration(raw.Age)
		if err != nil || d < 0 {
			p.errf(n.Line, "test %q: age: %q is not a duration like 40s", name, raw.Age)
			return t, false
		}
		t.Age = d
	}
	return t, true
}

// ParseOutcome reads "allow", "REFUSE" or "OUTCOME_DUPLICATE".
func ParseOutcome(s string) (yesguardv1.Outcome, error) {
	name := "OUTCOME_" + strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(s)), "OUTCOME_")
	v, ok := yesguardv1.Outcome_value[name]
	if !ok || v == 0 {
		return 0, fmt.Errorf("%q: want allow, refuse, duplicate or ignored", s)
	}
	return yesguardv1.Outcome(v), nil
}

// ParseReason reads "negated", "NOT_PLAIN" or "REASON_CONFIRMED".
func ParseReason(s string) (yesguardv1.Reason, error) {
	name := "REASON_" + strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(s)), "REASON_")
	v, ok := yesguardv1.Reason_value[name]
	if !ok || v == 0 {
		return 0, fmt.Errorf("%q is not a reason (confirmed, negated, not_plain, no_question, action_mismatch, ...: the Reason enum of guard.proto)", s)
	}
	return yesguardv1.Reason(v), nil
}
