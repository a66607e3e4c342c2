// Command bench is yesguard's load generator. It measures the guard against
// the floor of its own transport, side by side in one run, and prints one
// table whose goal rows are issue 15's goals, each marked met or not met
// from this run's figures:
//
//   - Check overhead: Check over gRPC on loopback (transcript already in,
//     ALLOW and REFUSE) against the empty unary call of the same server
//     (the gRPC health check).
//   - Wake-up: for a Check waiting on a late transcript, the time from the
//     event's publish to the answer, against a bare NATS subscriber's
//     publish-to-receive time.
//   - Ingestion: transcript events per second the guard absorbs (decoded
//     and applied to the store) against a bare consumer that only counts
//     the same messages: a core subscriber with the memory state, an
//     ordered consumer of the guard's own stream with the JetStream state.
//   - Scale: Check throughput with a contact centre's mix of first-time
//     ALLOWs, REFUSEs and DUPLICATE retries while other calls talk,
//     against health checks at the same concurrency; and memory per
//     active call at several call counts, with the slope between them.
//   - Judge: the rules on one decision per language (patterns.Judge under
//     testing.Benchmark, in the bench process).
//   - Flood: Check p50 and p99 of fresh calls while a publisher floods the
//     guard with 4 KB events on other calls, next to a quiet run.
//
// By default it starts a guard in-process (server.New on 127.0.0.1:0, an
// embedded NATS server, a discarding decision sink) once with each state,
// the memory state then the JetStream state; -grpc-addr and -nats-url point
// it at a running guard instead. Timing lives here and in the Go
// benchmarks, never in tests.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// config is the command line.
type config struct {
	// Duration is the time the timed phases share (overhead, wake-up,
	// throughput); loading, ingestion and memory come on top.
	Duration time.Duration
	// Seed fixes every random choice (texts, calls picked, jitter).
	Seed uint64
	// GRPCAddr and NATSURL name an external guard; both empty starts one
	// in-process.
	GRPCAddr, NATSURL string
	// MetricsURL is the external guard's /metrics, read to tell when it has
	// applied the events published (ingestion and loading).
	MetricsURL string
	// SubjectPrefix the guard subscribes under.
	SubjectPrefix string
	// PolicyPath for the in-process guard; empty uses the bench policy.
	PolicyPath string
	// AllowCalls are loaded for the overhead phase: each ALLOW needs a
	// fresh call.
	AllowCalls int
	// ScaleCalls are held during the throughput phase.
	ScaleCalls int
	// Concurrency of the throughput phase.
	Concurrency int
	// StreamRate is the events per second streamed during the throughput
	// phase.
	StreamRate int
	// IngestEvents published per ingestion run.
	IngestEvents int
	// MemCalls lists the call counts memory per call is measured at.
	MemCalls []int
	// CPUProfile and MemProfile name pprof outputs ("" for none).
	CPUProfile, MemProfile string
	// Phases run, by name (phaseNames); all of them by default.
	Phases map[string]bool
	// State of the in-process guard: memory, jetstream, or both (the
	// default of the command: the guard's phases run once with each).
	State string
}

// phaseNames are the phases -phases can pick, in the order they run.
var phaseNames = []string{"memory", "judge", "overhead", "wake", "ingest", "throughput", "flood"}

func main() { os.Exit(run()) }

func run() int {
	var cfg config
	var memCalls, phases string
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.DurationVar(&cfg.Duration, "duration", 20*time.Second, "time shared by the timed phases (overhead, wake-up, throughput)")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "seed of every random choice")
	fs.StringVar(&cfg.GRPCAddr, "grpc-addr", "", "gRPC address of an external guard (with -nats-url); empty runs one in-process")
	fs.StringVar(&cfg.NATSURL, "nats-url", "", "NATS URL the external guard reads transcripts from")
	fs.StringVar(&cfg.MetricsURL, "metrics-url", "", "the external guard's /metrics URL (e.g. http://127.0.0.1:9090/metrics); needed to time its ingestion")
	fs.StringVar(&cfg.SubjectPrefix, "subject-prefix", "yesguard.transcript", "subject prefix the guard subscribes under")
	fs.StringVar(&cfg.PolicyPath, "policy", "", "policy file for the in-process guard (default: the bench policy)")
	fs.IntVar(&cfg.AllowCalls, "allow-calls", 0, "calls loaded for the overhead phase, each ALLOW using a fresh one (0: 3000 a second of the phase)")
	fs.IntVar(&cfg.ScaleCalls, "calls", 5000, "calls held during the throughput phase")
	fs.IntVar(&cfg.Concurrency, "concurrency", 64, "concurrent Checks in the throughput phase")
	fs.IntVar(&cfg.StreamRate, "stream-rate", 10000, "transcript events per second streamed during the throughput phase")
	fs.IntVar(&cfg.IngestEvents, "ingest-events", 100000, "events published per ingestion run")
	fs.StringVar(&memCalls, "mem-calls", "1000,10000,100000", "call counts to measure memory per call at (the slope is taken between the fewest and the most)")
	fs.StringVar(&phases, "phases", strings.Join(phaseNames, ","), "phases to run, comma-separated (a profile of one phase: -phases overhead -cpuprofile cpu.pprof)")
	fs.StringVar(&cfg.State, "state", "both", "state of the in-process guard: memory, jetstream, or both (each phase run with each, one above the other)")
	fs.StringVar(&cfg.CPUProfile, "cpuprofile", "", "write a CPU profile of the run to this file")
	fs.StringVar(&cfg.MemProfile, "memprofile", "", "write an allocation profile of the run to this file")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	for _, f := range strings.Split(memCalls, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			fmt.Fprintf(os.Stderr, "bench: -mem-calls: %q is not a positive count\n", f)
			return 2
		}
		cfg.MemCalls = append(cfg.MemCalls, n)
	}
	cfg.Phases = map[string]bool{}
	for _, f := range strings.Split(phases, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		if !slices.Contains(phaseNames, f) {
			fmt.Fprintf(os.Stderr, "bench: -phases: %q is not one of %s\n", f, strings.Join(phaseNames, ", "))
			return 2
		}
		cfg.Phases[f] = true
	}
	if len(cfg.Phases) == 0 {
		fmt.Fprintf(os.Stderr, "bench: -phases: name at least one of %s\n", strings.Join(phaseNames, ", "))
		return 2
	}
	if (cfg.GRPCAddr == "") != (cfg.NATSURL == "") {
		fmt.Fprintln(os.Stderr, "bench: -grpc-addr and -nats-url go together (an external guard), or neither (in-process)")
		return 2
	}
	if cfg.Duration <= 0 || cfg.Concurrency <= 0 || cfg.ScaleCalls <= 0 || cfg.AllowCalls < 0 || cfg.IngestEvents <= 0 || cfg.StreamRate < 0 {
		fmt.Fprintln(os.Stderr, "bench: -duration, -concurrency, -calls and -ingest-events must be above 0, -allow-calls and -stream-rate not below")
		return 2
	}
	if cfg.AllowCalls == 0 {
		cfg.AllowCalls = max(5000, int(cfg.Duration.Seconds()*shareOverhead*3000))
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if cfg.CPUProfile != "" {
		f, err := os.Create(cfg.CPUProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench: -cpuprofile:", err)
			return 1
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "bench: -cpuprofile:", err)
			return 1
		}
		defer func() {
			pprof.StopCPUProfile()
			_ = f.Close()
		}()
	}
	err := runBench(ctx, cfg, os.Stdout, os.Stderr)
	if cfg.MemProfile != "" {
		if perr := writeMemProfile(cfg.MemProfile); perr != nil {
			err = errors.Join(err, perr)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	return 0
}

func writeMemProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("-memprofile: %w", err)
	}
	defer f.Close()
	runtime.GC()
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		return fmt.Errorf("-memprofile: %w", err)
	}
	return nil
}
