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
		MemCalls:      []int{200},
		Phases:        map[string]bool{},
	}
	for _, p := range phaseNames {
		cfg.Phases[p] = true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out, errw bytes.Buffer
	if err := runBench(ctx, cfg, &out, &errw); err != nil {
		t.Fatalf("runBench: %v\nlog:\n%s", err, errw.String())
	}
	table := out.String()
	for _, row := range []string{
		"Check ALLOW p50", "Check ALLOW p99", "Check REFUSE p50", "Check REFUSE p99",
		"same-size canned answer", "ALLOW p50 inside the guard's handler", "REFUSE p50 inside the guard's handler",
		"approval signing p50", "Redeem p50", "Redeem p99",
		"wake-up publish→answer p50", "wake-up publish→answer p99",
		"ingestion, events/s", "Check throughput", "memory per active call, 200 calls",
		"Check ALLOW p50 during a flood", "Check ALLOW p99 during a flood",
	} {
		if !strings.Contains(table, row) {
			t.Errorf("the table has no %q row:\n%s", row, table)
		}
	}
	if strings.Contains(table, "had another outcome") {
		t.Errorf("some Checks were not judged as their phase expects:\n%s", table)
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
