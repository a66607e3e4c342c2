package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReplayReproducesAProbeRun: a probe run recorded with --record and
// replayed under the same policy reproduces every recorded decision; under
// a policy that lets the tool through without a yes, the refusals show as
// changed and replay exits 1.
func TestReplayReproducesAProbeRun(t *testing.T) {
	srv := startGuard(t, "")
	vars := guardEnv(srv)
	rec := filepath.Join(t.TempDir(), "run.jsonl")
	r := runCmd(t, vars, "probe", "--call-prefix", "rp", "--record", rec)
	r.expect(t, exitOK, "all 7 probes passed", "Recorded the run to "+rec)

	r = runCmd(t, nil, "replay", rec)
	r.expect(t, exitOK, "0 changed.")
	if strings.Contains(r.stdout, "CHANGED") {
		t.Fatalf("a decision changed under the same policy:\n%s", r.stdout)
	}
	// Every probe Check was re-judged: five scenarios, three Checks of the
	// two yeses.
	r = runCmd(t, nil, "replay", "--json", rec)
	var rep struct {
		Same, Changed int
		Calls         []struct {
			CallID    string `json:"call_id"`
			Decisions []struct {
				Kind     string
				Same     bool
				Recorded struct{ Outcome, Reason string }
				Now      *struct{ Outcome, Reason string }
				Note     string
			}
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("--json: %v\n%s", err, r.stdout)
	}
	if rep.Changed != 0 || rep.Same != 8 || len(rep.Calls) != 6 {
		t.Fatalf("replay --json: %d same, %d changed, %d calls; want 8, 0, 6:\n%s", rep.Same, rep.Changed, len(rep.Calls), r.stdout)
	}
	kinds := map[string]int{}
	for _, c := range rep.Calls {
		for _, d := range c.Decisions {
			kinds[d.Kind+" "+d.Recorded.Outcome]++
			if d.Kind == "complete" && d.Note != "" {
				t.Errorf("the Complete of %s was not applied: %s", c.CallID, d.Note)
			}
		}
	}
	if kinds["check ALLOW"] != 1 || kinds["check DUPLICATE"] != 2 || kinds["check REFUSE"] != 5 || kinds["complete UNSPECIFIED"] != 1 {
		t.Errorf("recorded decisions by kind: %v", kinds)
	}

	open := filepath.Join(t.TempDir(), "open.yaml")
	if err := os.WriteFile(open, []byte("tools:\n  submit_appeal:\n    confirm: false\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = runCmd(t, nil, "replay", "--policy", open, "--call", "rp-1", rec)
	r.expect(t, exitError, "recorded  REFUSE", "now       ALLOW     not_required", "[CHANGED]", "1 changed.")
}
