package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthgrpc "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
	"github.com/yesguard/yesguard/transcript"
)

// Shares of -duration given to each timed phase.
const (
	shareOverhead   = 0.35
	shareWake       = 0.20
	shareHealthTput = 0.12
	shareCheckTput  = 0.33
	// shareFlood comes on top: half quiet, half under the flood.
	shareFlood = 0.20
)

// Fixed sizes of the loaded calls.
const (
	refuseCalls  = 512
	wakeCalls    = 4000
	scaleHistory = 5 // small-talk exchanges before the question: 12 finals a call
	loadChunk    = 20000
	checkTimeout = 5 * time.Second
	absorbStep   = 2 * time.Millisecond
	absorbWait   = 2 * time.Minute
	warmupChecks = 300
	bookTool     = "book_appointment"
)

// bench is one run's state.
type bench struct {
	cfg    config
	t      *target
	log    func(format string, a ...any)
	rng    *rand.Rand
	conn   *grpc.ClientConn
	guard  yesguardv1.GuardClient
	health healthgrpc.HealthClient
	pub    *nats.Conn // publishes every transcript
	bare   *nats.Conn // the bare subscriber's own connection

	rows  []row
	notes []string
	runID string
}

func runBench(ctx context.Context, cfg config, out, errw io.Writer) (err error) {
	started := time.Now()
	load0 := loadAvg()
	b := &bench{
		cfg:   cfg,
		log:   func(format string, a ...any) { fmt.Fprintf(errw, "bench: "+format+"\n", a...) },
		rng:   rand.New(rand.NewPCG(cfg.Seed, 0x9e3779b97f4a7c15)),
		runID: strconv.FormatInt(started.UnixNano()%1e9, 36),
	}

	// Memory first, on a quiet heap, before the guard starts.
	var mem []memResult
	if cfg.Phases["memory"] {
		b.log("memory per call at %v calls", cfg.MemCalls)
		if mem, err = measureMemory(cfg.MemCalls, cfg.Seed); err != nil {
			return err
		}
	}

	// The judge next, in the bench process alone, before the guard starts.
	var judgeRes []judgeResult
	var judgeMissing []string
	if cfg.Phases["judge"] {
		b.log("judge: testing.Benchmark of patterns.Judge, %s a sample", judgeBenchTime)
		if judgeRes, judgeMissing, err = measureJudge(); err != nil {
			return err
		}
	}

	var stateNotes [][]string
	if needsGuard(cfg.Phases) {
		// -state both runs the guard's phases once per state, the memory
		// state first, so their rows stand one above the other. Each
		// state's run carries the pprof label state=<state> (the guard's
		// goroutines inherit it from its start), so that one profile of
		// the run can be read per state (-tagfocus state=jetstream).
		states := []string{cfg.State}
		if cfg.State == "both" && cfg.GRPCAddr == "" {
			states = []string{"memory", "jetstream"}
		}
		for _, st := range states {
			b.cfg.State = st
			if len(states) > 1 {
				b.rows = append(b.rows, row{measure: "state " + st})
			}
			b.notes = nil
			pprof.Do(ctx, pprof.Labels("state", st), func(ctx context.Context) { err = b.guardPhases(ctx) })
			if err != nil {
				return err
			}
			stateNotes = append(stateNotes, b.notes)
		}
		b.cfg.State = cfg.State
		b.notes = mergeStateNotes(states, stateNotes)
	}
	if len(judgeRes) > 0 {
		rows, notes := judgeRows(judgeRes, judgeMissing)
		b.rows = append(b.rows, rows...)
		b.rows = append(b.rows, row{})
		b.notes = append(b.notes, notes...)
	}
	b.rows = append(b.rows, memoryRows(mem)...)
	if len(mem) > 0 {
		b.notes = append(b.notes, "memory: live heap growth after GC of a transcript store (the guard's per-call state) filled through Decode and Apply in the bench process before the guard starts; texts 20-90 bytes, agent turns with response ids")
	}

	where := "in-process guard (server.New, embedded NATS, state " + cfg.State + ", discarding decision sink)"
	if cfg.State == "both" {
		where = "in-process guards (server.New, embedded NATS, the memory state then the jetstream state, discarding decision sink)"
	}
	switch {
	case b.t == nil:
		where = "no guard (memory only)"
	case !b.t.embedded:
		where = "external guard at " + cfg.GRPCAddr + ", NATS " + cfg.NATSURL
	}
	head := []string{
		fmt.Sprintf("yesguard bench  %s  (-duration %s -seed %d, wall %s)", started.Format("2006-01-02 15:04 MST"), cfg.Duration, cfg.Seed, time.Since(started).Round(time.Second)),
		fmt.Sprintf("%s; %d CPU %s, %s RAM, GOMAXPROCS %d; load avg %s at start, %s at end", runtime.Version(), runtime.NumCPU(), cpuModel(), memTotal(), runtime.GOMAXPROCS(0), load0, loadAvg()),
		where,
		"",
	}
	printTable(out, head, b.rows, append([]string{""}, b.notes...))
	return nil
}

// mergeStateNotes lists each state's notes: a note both states wrote alike
// once, the others under their state's name.
func mergeStateNotes(states []string, notes [][]string) []string {
	if len(states) == 1 {
		return notes[0]
	}
	var out []string
	for i, ns := range notes {
		for _, n := range ns {
			inAll := true
			for _, other := range notes {
				inAll = inAll && slices.Contains(other, n)
			}
			switch {
			case !inAll:
				out = append(out, "["+states[i]+"] "+n)
			case !slices.Contains(out, n):
				out = append(out, n)
			}
		}
	}
	return out
}

// needsGuard reports whether any phase asked for needs a running guard.
func needsGuard(phases map[string]bool) bool {
	return phases["overhead"] || phases["wake"] || phases["ingest"] || phases["throughput"] || phases["flood"]
}

// guardPhases starts the guard (or connects to the external one), loads
// the calls and runs the phases asked for that need it.
func (b *bench) guardPhases(ctx context.Context) (err error) {
	cfg := b.cfg
	b.t, err = startTarget(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() {
		if serr := b.t.stop(); serr != nil {
			err = errors.Join(err, fmt.Errorf("stop guard: %w", serr))
		}
	}()
	b.conn, err = grpc.NewClient(b.t.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("grpc client: %w", err)
	}
	defer b.conn.Close()
	b.guard, b.health = yesguardv1.NewGuardClient(b.conn), healthgrpc.NewHealthClient(b.conn)
	if b.pub, err = nats.Connect(b.t.natsURL, append(b.t.natsOpts, nats.Name("yesguard-bench-publisher"))...); err != nil {
		return fmt.Errorf("nats publisher: %w", err)
	}
	defer b.pub.Close()
	if b.bare, err = nats.Connect(b.t.natsURL, append(b.t.natsOpts, nats.Name("yesguard-bench-bare"))...); err != nil {
		return fmt.Errorf("nats bare subscriber: %w", err)
	}
	defer b.bare.Close()

	calls, err := b.load(ctx)
	if err != nil {
		return err
	}
	if err := b.warmup(ctx, calls); err != nil {
		return err
	}
	d := cfg.Duration
	phases := []struct {
		name string
		run  func() error
	}{
		{"overhead", func() error { return b.overhead(ctx, calls, time.Duration(float64(d)*shareOverhead)) }},
		{"wake", func() error { return b.wake(ctx, calls, time.Duration(float64(d)*shareWake)) }},
		{"ingest", func() error { return b.ingest(ctx) }},
		{"throughput", func() error {
			return b.throughput(ctx, calls, time.Duration(float64(d)*shareHealthTput), time.Duration(float64(d)*shareCheckTput))
		}},
		{"flood", func() error { return b.flood(ctx, time.Duration(float64(d)*shareFlood)) }},
	}
	for _, p := range phases {
		if !cfg.Phases[p.name] {
			continue
		}
		if err := p.run(); err != nil {
			return err
		}
		b.rows = append(b.rows, row{})
	}
	return nil
}

// loaded names the calls the phases use.
type loaded struct {
	allow  []string // question then a plain yes: each ALLOWs once
	refuse []string // question then a refusal
	wake   []*conv  // question, no answer yet
	scale  []*conv  // ten finals of small talk; the throughput phase adds questions and yeses
}

// load publishes every call's transcript and waits until the guard holds
// them all.
func (b *bench) load(ctx context.Context) (*loaded, error) {
	var l loaded
	var msgs []msg
	for i := 0; i < b.cfg.AllowCalls; i++ {
		c := newConv(b.t.prefix, fmt.Sprintf("allow-%s-%d", b.runID, i), b.rng)
		c.history(1)
		c.final(transcript.Agent, pick(b.rng, bookQuestions))
		c.final(transcript.Caller, pick(b.rng, yeses))
		msgs = append(msgs, c.take()...)
		l.allow = append(l.allow, c.call)
	}
	for i := 0; i < refuseCalls; i++ {
		c := newConv(b.t.prefix, fmt.Sprintf("refuse-%s-%d", b.runID, i), b.rng)
		c.history(1)
		c.final(transcript.Agent, pick(b.rng, bookQuestions))
		c.final(transcript.Caller, refusals[i%len(refusals)])
		msgs = append(msgs, c.take()...)
		l.refuse = append(l.refuse, c.call)
	}
	for i := 0; i < wakeCalls; i++ {
		c := newConv(b.t.prefix, fmt.Sprintf("wake-%s-%d", b.runID, i), b.rng)
		c.history(1)
		c.final(transcript.Agent, pick(b.rng, bookQuestions))
		msgs = append(msgs, c.take()...)
		l.wake = append(l.wake, c)
	}
	for i := 0; i < b.cfg.ScaleCalls; i++ {
		c := newConv(b.t.prefix, fmt.Sprintf("scale-%s-%d", b.runID, i), b.rng)
		c.history(scaleHistory)
		msgs = append(msgs, c.take()...)
		l.scale = append(l.scale, c)
	}
	b.log("loading %d calls (%d events)", len(l.allow)+len(l.refuse)+len(l.wake)+len(l.scale), len(msgs))
	if err := b.publishAbsorbed(ctx, msgs); err != nil {
		return nil, fmt.Errorf("load calls: %w", err)
	}
	return &l, nil
}

// publishAbsorbed publishes msgs in chunks, waiting after each until the
// guard has taken it in (without -metrics-url for an external guard: a
// pause instead), so no buffer on the way overflows.
func (b *bench) publishAbsorbed(ctx context.Context, msgs []msg) error {
	for len(msgs) > 0 {
		n := min(len(msgs), loadChunk)
		base, ok, err := b.t.absorbed(ctx)
		if err != nil {
			return err
		}
		for _, m := range msgs[:n] {
			if err := b.pub.Publish(m.subject, m.data); err != nil {
				return fmt.Errorf("publish: %w", err)
			}
		}
		if err := b.pub.FlushTimeout(10 * time.Second); err != nil {
			return fmt.Errorf("flush: %w", err)
		}
		if ok {
			if _, err := b.t.waitAbsorbed(ctx, base+float64(n), absorbStep, absorbWait); err != nil {
				return err
			}
		} else {
			time.Sleep(time.Duration(n) * 20 * time.Microsecond)
		}
		msgs = msgs[n:]
	}
	return nil
}

func (b *bench) check(ctx context.Context, call string, args *structpb.Struct) (*yesguardv1.CheckResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	return b.guard.Check(ctx, &yesguardv1.CheckRequest{CallId: call, Tool: bookTool, Args: args, ToolCallId: "call_bench", ResponseId: "resp_tool"})
}

func (b *bench) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	_, err := b.health.Check(ctx, &healthgrpc.HealthCheckRequest{})
	return err
}

func slotArgs(n int) *structpb.Struct {
	return &structpb.Struct{Fields: map[string]*structpb.Value{
		"slot":    structpb.NewStringValue("slot-" + strconv.Itoa(n)),
		"patient": structpb.NewStringValue("p-1043"),
	}}
}

// warmup runs the paths once so connections, caches and the rules'
// compiled actions are warm.
func (b *bench) warmup(ctx context.Context, l *loaded) error {
	for i := 0; i < warmupChecks; i++ {
		if err := b.ping(ctx); err != nil {
			return fmt.Errorf("health check: %w", err)
		}
		if _, err := b.check(ctx, l.refuse[i%len(l.refuse)], slotArgs(i)); err != nil {
			return fmt.Errorf("check: %w", err)
		}
	}
	return nil
}

// overhead interleaves, on one connection each and one call at a time,
// in a rotating order: the guard's health check, an ALLOW Check (a fresh
// call each), a REFUSE Check, and against a bench-local gRPC server the
// same two calls with a canned copy of a real ALLOW answer: the wire's
// cost of an answer that size, with no work behind it.
func (b *bench) overhead(ctx context.Context, l *loaded, d time.Duration) error {
	b.log("overhead: %s", d)
	canned, err := b.startCanned(ctx, l)
	if err != nil {
		return err
	}
	defer canned.stop()

	var health, allowLat, refuseLat, cannedHealth, cannedCheck lat
	var badAllow, badRefuse int
	var allowBytes, refuseBytes int
	var firstBad string
	var approvals []issued // the ALLOWs' approvals, redeemed after the phase
	next := 0
	// timed runs one Check, keeps its latency and answer size, and counts
	// an outcome other than want.
	timed := func(call string, args *structpb.Struct, want yesguardv1.Outcome, lats *lat, size, bad *int) error {
		t0 := time.Now()
		resp, err := b.check(ctx, call, args)
		el := time.Since(t0)
		if err != nil {
			return fmt.Errorf("check %s: %w", call, err)
		}
		*lats = append(*lats, el)
		*size += proto.Size(resp)
		if a := resp.GetApproval(); a != "" && len(approvals) < maxRedeems {
			approvals = append(approvals, issued{a, args})
		}
		if resp.GetOutcome() != want {
			*bad++
			if firstBad == "" {
				firstBad = fmt.Sprintf("%s %s/%s: %s", call, resp.GetOutcome(), resp.GetReason(), resp.GetEvidence().GetDetail())
			}
		}
		return nil
	}
	// The first guardProbes probes call the guard (health, ALLOW,
	// REFUSE); the rest call the canned server.
	const guardProbes = 3
	probes := []func(i int) error{
		func(int) error {
			t0 := time.Now()
			if err := b.ping(ctx); err != nil {
				return fmt.Errorf("health check: %w", err)
			}
			health = append(health, time.Since(t0))
			return nil
		},
		func(i int) error {
			call := l.allow[next]
			next++
			return timed(call, slotArgs(i), yesguardv1.Outcome_OUTCOME_ALLOW, &allowLat, &allowBytes, &badAllow)
		},
		func(i int) error {
			return timed(l.refuse[i%len(l.refuse)], slotArgs(i), yesguardv1.Outcome_OUTCOME_REFUSE, &refuseLat, &refuseBytes, &badRefuse)
		},
		func(int) error {
			t0 := time.Now()
			if _, err := canned.health.Check(ctx, &healthgrpc.HealthCheckRequest{}); err != nil {
				return fmt.Errorf("canned health check: %w", err)
			}
			cannedHealth = append(cannedHealth, time.Since(t0))
			return nil
		},
		func(i int) error {
			t0 := time.Now()
			if _, err := canned.guard.Check(ctx, &yesguardv1.CheckRequest{CallId: l.allow[0], Tool: bookTool, Args: slotArgs(i), ToolCallId: "call_bench", ResponseId: "resp_tool"}); err != nil {
				return fmt.Errorf("canned check: %w", err)
			}
			cannedCheck = append(cannedCheck, time.Since(t0))
			return nil
		},
	}
	// loop runs ps in a rotating order for d, or until the ALLOW calls
	// run out.
	loop := func(ps []func(int) error, d time.Duration) error {
		end := time.Now().Add(d)
		for i := 0; time.Now().Before(end) && next < len(l.allow); i++ {
			for k := range ps {
				if err := ps[(i+k)%len(ps)](i); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := loop(probes, d); err != nil {
		return err
	}
	if next == len(l.allow) {
		b.notes = append(b.notes, fmt.Sprintf("overhead: the %d ALLOW calls ran out before the phase's %s; raise -allow-calls", len(l.allow), d))
	}
	if badAllow+badRefuse > 0 {
		b.notes = append(b.notes, fmt.Sprintf("overhead: %d ALLOW and %d REFUSE checks had another outcome, e.g. %s", badAllow, badRefuse, firstBad))
	}
	b.notes = append(b.notes, fmt.Sprintf("overhead: answers average %d bytes (ALLOW) and %d bytes (REFUSE) of protobuf, the health answer 2; the canned answer is %d bytes",
		allowBytes/max(1, len(allowLat)), refuseBytes/max(1, len(refuseLat)), proto.Size(canned.resp)))
	hp50, hp99 := health.pct(50), health.pct(99)
	row2 := func(name string, l lat) []row {
		return []row{
			{fmt.Sprintf("%s p50 (n=%d) vs health", name, len(l)), us(l.pct(50)), us(hp50), ratio(float64(l.pct(50)), float64(hp50)), "≤ 1.30x", atMost(frac(float64(l.pct(50)), float64(hp50)), 1.30)},
			{name + " p99 vs health", us(l.pct(99)), us(hp99), ratio(float64(l.pct(99)), float64(hp99)), "", ""},
		}
	}
	b.rows = append(b.rows, row2("Check ALLOW", allowLat)...)
	b.rows = append(b.rows, row2("Check REFUSE", refuseLat)...)
	b.rows = append(b.rows, row{"  same-size canned answer, no work: p50 vs its health", us(cannedCheck.pct(50)), us(cannedHealth.pct(50)), ratio(float64(cannedCheck.pct(50)), float64(cannedHealth.pct(50))), "the answer's wire cost", ""})

	// Then, for a quarter of the phase more, the guard's own three calls
	// again, their handlers timed on the guard's side: apart, so that the
	// rows above are taken with the timer off.
	if b.t.timer == nil {
		return b.approvalRows(ctx, approvals, 0, d/4)
	}
	b.t.timer.start()
	err = loop(probes[:guardProbes], d/4)
	inside := b.t.timer.stop()
	if err != nil {
		return err
	}
	for _, k := range []struct{ kind, name string }{{"allow", "ALLOW"}, {"refuse", "REFUSE"}} {
		b.rows = append(b.rows, row{
			fmt.Sprintf("  %s p50 inside the guard's handler (n=%d) vs health's", k.name, len(inside[k.kind])),
			us(inside[k.kind].pct(50)), us(inside["health"].pct(50)), "-", "the guard's own work", "",
		})
	}
	b.notes = append(b.notes, "overhead, inside the handler: for a quarter of the phase more, an interceptor on the guard times each handler, request decoded to answer returned (before gRPC encodes it); off, while the rows above are taken, it costs an atomic load a call")
	return b.approvalRows(ctx, approvals, inside["allow"].pct(50), d/4)
}

// cannedServer answers every Check with one recorded answer.
type cannedServer struct {
	yesguardv1.UnimplementedGuardServer
	resp   *yesguardv1.CheckResponse
	srv    *grpc.Server
	conn   *grpc.ClientConn
	guard  yesguardv1.GuardClient
	health healthgrpc.HealthClient
}

func (c *cannedServer) Check(context.Context, *yesguardv1.CheckRequest) (*yesguardv1.CheckResponse, error) {
	return c.resp, nil
}

func (c *cannedServer) stop() {
	_ = c.conn.Close()
	c.srv.Stop()
}

// startCanned records a real ALLOW answer (from the last loaded call, so
// the phase's own ALLOWs are untouched) and serves it from a local gRPC
// server with the health service.
func (b *bench) startCanned(ctx context.Context, l *loaded) (*cannedServer, error) {
	last := l.allow[len(l.allow)-1]
	l.allow = l.allow[:len(l.allow)-1]
	resp, err := b.check(ctx, last, slotArgs(-1))
	if err != nil {
		return nil, fmt.Errorf("check %s: %w", last, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("canned server: %w", err)
	}
	c := &cannedServer{resp: resp, srv: grpc.NewServer()}
	yesguardv1.RegisterGuardServer(c.srv, c)
	healthgrpc.RegisterHealthServer(c.srv, health.NewServer())
	go func() { _ = c.srv.Serve(ln) }()
	c.conn, err = grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		c.srv.Stop()
		return nil, fmt.Errorf("canned client: %w", err)
	}
	c.guard, c.health = yesguardv1.NewGuardClient(c.conn), healthgrpc.NewHealthClient(c.conn)
	for i := 0; i < warmupChecks; i++ {
		if _, err := c.guard.Check(ctx, &yesguardv1.CheckRequest{CallId: last, Tool: bookTool}); err != nil {
			c.stop()
			return nil, fmt.Errorf("canned check: %w", err)
		}
		if _, err := c.health.Check(ctx, &healthgrpc.HealthCheckRequest{}); err != nil {
			c.stop()
			return nil, fmt.Errorf("canned health check: %w", err)
		}
	}
	return c, nil
}

// wake sends a Check on a call whose answer has not arrived, publishes
// the caller's yes a moment later, and times publish to answer. Each
// iteration also times a bare NATS publish to receive, the floor.
func (b *bench) wake(ctx context.Context, l *loaded, d time.Duration) error {
	b.log("wake-up: %s", d)
	echo := make(chan time.Time, 1)
	sub, err := b.bare.Subscribe("bench.echo."+b.runID, func(*nats.Msg) { echo <- time.Now() })
	if err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	defer sub.Unsubscribe()
	if err := b.bare.Flush(); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	type answer struct {
		resp *yesguardv1.CheckResponse
		err  error
		at   time.Time
	}
	var wakeLat, floor lat
	waited, bad := 0, 0
	end := time.Now().Add(d)
	for i := 0; i < len(l.wake) && time.Now().Before(end); i++ {
		c := l.wake[i]
		done := make(chan answer, 1)
		go func() {
			resp, err := b.check(ctx, c.call, slotArgs(i))
			done <- answer{resp, err, time.Now()}
		}()
		// Let the Check reach the guard and start waiting.
		time.Sleep(time.Millisecond + time.Duration(b.rng.IntN(500))*time.Microsecond)
		c.final(transcript.Caller, pick(b.rng, yeses))
		m := c.take()[0]
		pubAt := time.Now()
		if err := b.pub.Publish(m.subject, m.data); err != nil {
			return fmt.Errorf("publish: %w", err)
		}
		a := <-done
		if a.err != nil {
			return fmt.Errorf("check %s: %w", c.call, a.err)
		}
		wakeLat = append(wakeLat, a.at.Sub(pubAt))
		if a.resp.GetWaitedMs() >= 1 {
			waited++
		}
		if a.resp.GetOutcome() != yesguardv1.Outcome_OUTCOME_ALLOW {
			bad++
		}

		pubAt = time.Now()
		if err := b.pub.Publish("bench.echo."+b.runID, m.data); err != nil {
			return fmt.Errorf("publish: %w", err)
		}
		select {
		case at := <-echo:
			floor = append(floor, at.Sub(pubAt))
		case <-time.After(5 * time.Second):
			return errors.New("bare subscriber: no echo within 5s")
		}
	}
	if bad > 0 {
		b.notes = append(b.notes, fmt.Sprintf("wake-up: %d of %d checks were not ALLOWed", bad, len(wakeLat)))
	}
	b.notes = append(b.notes, fmt.Sprintf("wake-up: %d of %d checks had waited >= 1 ms for the event when answered (the rest found it on arrival)", waited, len(wakeLat)))
	fp50, fp99 := floor.pct(50), floor.pct(99)
	b.rows = append(b.rows,
		row{fmt.Sprintf("wake-up publish→answer p50 (n=%d) vs NATS publish→receive", len(wakeLat)), ms(wakeLat.pct(50)), ms(fp50), ratio(float64(wakeLat.pct(50)), float64(fp50)), "", ""},
		row{"wake-up publish→answer p99 vs NATS publish→receive", ms(wakeLat.pct(99)), ms(fp99), ratio(float64(wakeLat.pct(99)), float64(fp99)), "p99 < 2 ms",
			verdict(len(wakeLat) > 0 && wakeLat.pct(99) < 2*time.Millisecond)},
	)
	return nil
}

// ingestStream is n events of calls talking at once, interleaved as a
// NATS server delivers many calls: per exchange an agent final, then the
// caller's speech started, interim, final and speech stopped.
func ingestStream(prefix, callPrefix string, n int, rng *rand.Rand) []msg {
	const perCall = 60
	convs := make([]*conv, max(1, n/perCall))
	for i := range convs {
		convs[i] = newConv(prefix, callPrefix+"-"+strconv.Itoa(i), rng)
	}
	out := make([]msg, 0, n+8)
	for len(out) < n {
		for _, c := range convs {
			if len(out) >= n {
				break
			}
			c.final(transcript.Agent, pick(rng, agentSmallTalk))
			c.callerSpeaks(pick(rng, callerSmallTalk))
			out = append(out, c.take()...)
		}
	}
	return out[:n]
}
