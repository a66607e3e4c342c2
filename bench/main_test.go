package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestRunBenchPrintsEveryRow runs the load generator at a small size
// against an in-process guard, so that a change that breaks a phase fails
// here rather than in the next person's benchmark run. It checks the
// table's rows and that every Check had the outcome its phase expects;
// the figures themselves are timing and are not asserted.
func TestRunBenchPrintsEveryRow(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a guard and runs every phase for a few seconds")
	}
	cfg := config{
		Duration:      2 * time.Second,
		Seed:          1,
		SubjectPrefix: "yesguard.transcript",
		AllowCalls:    5000,
		ScaleCalls:    200,
		Concurrency:   4,
		StreamRate:    500,
		IngestEvents:  3000,
		MemCalls:      []int{100, 400},
		Phases:        map[string]bool{},
		State:         "both",
	}
	for _, p := range phaseNames {
		cfg.Phases[p] = true
	}
	judgeBenchTime = "20x" // the rows, not the figure
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out, errw bytes.Buffer
	if err := runBench(ctx, cfg, &out, &errw); err != nil {
		t.Fatalf("runBench: %v\nlog:\n%s", err, errw.String())
	}
	table := out.String()
	// Every guard row once per state, the memory state's first.
	perState := []string{
		"Check ALLOW p50", "Check ALLOW p99", "Check REFUSE p50", "Check REFUSE p99",
		"same-size canned answer", "ALLOW p50 inside the guard's handler", "REFUSE p50 inside the guard's handler",
		"approval signing p50", "Redeem p50", "Redeem p99",
		"wake-up publish→answer p50", "wake-up publish→answer p99",
		"Check throughput, realistic mix", "events streamed meanwhile",
		"Check ALLOW p50 during a flood", "Check ALLOW p99 during a flood",
	}
	memPart, jsPart, ok := strings.Cut(table, "state jetstream")
	if !ok || !strings.Contains(memPart, "state memory") {
		t.Fatalf("the table does not have both states, memory then jetstream:\n%s", table)
	}
	for _, r := range perState {
		if !strings.Contains(memPart, r) {
			t.Errorf("the memory state has no %q row:\n%s", r, table)
		}
		if !strings.Contains(jsPart, r) {
			t.Errorf("the jetstream state has no %q row:\n%s", r, table)
		}
	}
	if !strings.Contains(memPart, "ingestion, core subscription") {
		t.Errorf("the memory state's ingestion is not against a bare core subscriber:\n%s", table)
	}
	if !strings.Contains(jsPart, "ingestion, JetStream consumer") {
		t.Errorf("the jetstream state's ingestion is not against a bare JetStream consumer:\n%s", table)
	}
	for _, r := range []string{
		"memory per active call, 100 calls", "memory per active call, 400 calls", "memory slope, 100 to 400 calls",
		"judge en/confirm, per decision", "judge en/negated, per decision",
	} {
		if !strings.Contains(table, r) {
			t.Errorf("the table has no %q row:\n%s", r, table)
		}
	}
	// Every row with a goal says whether this run met it.
	for _, line := range strings.Split(table, "\n") {
		if strings.Contains(line, "≤ 1.30x") || strings.Contains(line, "p99 < 2 ms") || strings.Contains(line, "≥ 0.") || strings.Contains(line, "≤ 6 KiB") || strings.Contains(line, "≤ 5 allocs") {
			if !strings.HasSuffix(line, " met") {
				t.Errorf("a goal row without met / not met: %q", line)
			}
		}
	}
	// The throughput phase produced its mix: first-time ALLOWs and
	// REFUSEs by what the caller said, and DUPLICATE retries; and not the
	// EVIDENCE_USED refusal of a yes already used.
	for _, want := range []string{"throughput mix produced", "ALLOW/CONFIRMED", "REFUSE/NEGATED", "DUPLICATE/DUPLICATE"} {
		if !strings.Contains(table, want) {
			t.Errorf("the throughput notes have no %q:\n%s", want, table)
		}
	}
	if strings.Contains(table, "EVIDENCE_USED") {
		t.Errorf("the throughput phase refused a yes already used:\n%s", table)
	}
	if strings.Contains(table, "had another outcome") {
		t.Errorf("some Checks or judge samples were not judged as their phase expects:\n%s", table)
	}
}

// TestOnlyPhasesAskedRun runs the memory phase alone and checks that the
// others' rows are absent and no guard was started.
func TestOnlyPhasesAskedRun(t *testing.T) {
	cfg := config{Duration: time.Second, Seed: 1, MemCalls: []int{100}, Phases: map[string]bool{"memory": true}}
	// No guard is started for memory alone: a guard would need a subject
	// prefix, which this config leaves out.
	var out, errw bytes.Buffer
	if err := runBench(context.Background(), cfg, &out, &errw); err != nil {
		t.Fatalf("runBench: %v\nlog:\n%s", err, errw.String())
	}
	table := out.String()
	if !strings.Contains(table, "memory per active call, 100 calls") {
		t.Errorf("no memory row:\n%s", table)
	}
	if !strings.Contains(table, "no guard (memory only)") {
		t.Errorf("the header does not say no guard ran:\n%s", table)
	}
	for _, row := range []string{"Check ALLOW", "wake-up", "ingestion", "throughput"} {
		if strings.Contains(table, row) {
			t.Errorf("-phases memory printed a %q row:\n%s", row, table)
		}
	}
}
