package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runTestCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	r := runCmd(t, nil, append([]string{"test"}, args...)...)
	return r.code, r.stdout, r.stderr
}

// TestTestCommand: the shipped example tests pass (exit 0, go test's ok
// line); a wrong expectation fails (exit 1) with its diff; --json is one
// document; a file that does not parse is a failure, never a pass.
func TestTestCommand(t *testing.T) {
	code, out, errs := runTestCmd(t, "../../policy.example.test.yaml")
	if code != exitOK || !strings.HasPrefix(out, "ok  \t../../policy.example.test.yaml") {
		t.Fatalf("example tests: exit %d\n%s%s", code, out, errs)
	}

	dir := t.TempDir()
	wrong := filepath.Join(dir, "wrong.test.yaml")
	if err := os.WriteFile(wrong, []byte(`tests:
  - name: yes then no must not be allowed
    turns:
      - agent: Shall I submit your appeal now?
      - caller: Yes. Wait, no.
    race: true
    tool: submit_appeal
    want: allow
`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, _ = runTestCmd(t, wrong)
	if code != exitError || !strings.Contains(out, "- outcome: allow\n    + outcome: refuse") || !strings.HasSuffix(out, "FAIL\n") {
		t.Fatalf("wrong expectation: exit %d\n%s", code, out)
	}
	code, out, _ = runTestCmd(t, "--json", wrong)
	var rep struct{ Passed, Failed int }
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != exitError || rep.Failed != 1 {
		t.Fatalf("--json: exit %d, %v, %+v\n%s", code, err, rep, out)
	}

	broken := filepath.Join(dir, "broken.test.yaml")
	if err := os.WriteFile(broken, []byte("tests:\n  - name: x\n    tool: t\n    want: perhaps\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, _ = runTestCmd(t, broken)
	if code != exitError || !strings.Contains(out, "broken.test.yaml:2") {
		t.Fatalf("broken file: exit %d\n%s", code, out)
	}
	if code, _, _ := runTestCmd(t, "--run", "(", wrong); code != exitUsage {
		t.Errorf("bad --run: exit %d, want %d", code, exitUsage)
	}
}
