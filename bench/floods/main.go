// Command floods measures, from outside a running guard (its NATS and
// gRPC, on loopback), how legitimate Checks on other calls fare while one
// publisher floods it: fresh call ids (-mode ids), one call's subject
// (subject), the whole transcript stream (overrun), or a call stuffed with
// large decision records read by two auditors (stuffed; the guard's policy
// must list a tool "note" with confirm: false). Each legitimate Check is a
// fresh call, a question and a yes published with acks, then a Check of
// submit_appeal with -deadline; it prints how many were answered within
// it, allowed and refused, their p50 and p99, and the guard's flood
// metrics. Bounded in events (-flood-max) and time (-flood-time).
// bench/README.md, "Floods", has the commands.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
)

var (
	mode      = flag.String("mode", "ids", "ids | subject | overrun | stuffed | quiet")
	natsURL   = flag.String("nats", "nats://127.0.0.1:4222", "")
	grpcAddr  = flag.String("grpc", "127.0.0.1:50051", "")
	httpAddr  = flag.String("http", "127.0.0.1:9090", "")
	checks    = flag.Int("checks", 500, "legitimate Checks")
	conc      = flag.Int("conc", 4, "legitimate Checks at once")
	deadline  = flag.Duration("deadline", time.Second, "each legitimate Check's deadline")
	floodMax  = flag.Int("flood-max", 1_500_000, "flood events at most")
	floodTime = flag.Duration("flood-time", 30*time.Second, "flood for at most this long")
	source    = flag.String("flood-source", "flood", "the flood's source")
	warm      = flag.Duration("warm", 3*time.Second, "flood this long before the legitimate Checks start")
	records   = flag.Int("records", 1100, "stuffed: records on the stuffed call")
)

func main() {
	flag.Parse()
	run := fmt.Sprint(time.Now().UnixNano())
	nc, err := nats.Connect(*natsURL, nats.Name("floodbench-legit"))
	must(err)
	js, err := jetstream.New(nc)
	must(err)
	cc, err := grpc.NewClient(*grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	must(err)
	guard := yesguardv1.NewGuardClient(cc)

	fctx, stop := context.WithTimeout(context.Background(), *floodTime)
	defer stop()
	var sent, refusedAtStream atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	var floodTook time.Duration
	switch *mode {
	case "ids", "subject", "overrun":
		fc, err := nats.Connect(*natsURL, nats.Name("floodbench-flood"))
		must(err)
		fjs, _ := jetstream.New(fc, jetstream.WithPublishAsyncMaxPending(4096))
		wg.Go(func() { flood(fctx, fc, fjs, run, &sent, &refusedAtStream); floodTook = time.Since(start) })
		time.Sleep(*warm)
	case "stuffed":
		stuff(guard, "stuffed-"+run)
		for range 2 {
			wg.Go(func() { views(fctx, guard, "stuffed-"+run) })
		}
	}
	res := legit(guard, js, run)
	stop()
	wg.Wait()
	fmt.Printf("mode=%s flood_events_sent=%d flood_refused_to_publisher=%d flood_took=%s flood_rate=%.0f/s legit_took=%s\n", *mode, sent.Load(), refusedAtStream.Load(), floodTook.Round(time.Millisecond), float64(sent.Load())/max(floodTook, time.Millisecond).Seconds(), time.Since(start).Round(time.Millisecond))
	res.print()
	if *httpAddr != "" {
		fmt.Println(metricsOf(*httpAddr))
	}
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func flood(ctx context.Context, fc *nats.Conn, fjs jetstream.JetStream, run string, sent, refused *atomic.Int64) {
	text4k := strings.Repeat("flood ", 680)
	var pending []jetstream.PubAckFuture
	reap := func(all bool) {
		for len(pending) > 0 && (all || len(pending) > 2000) {
			f := pending[0]
			pending = pending[1:]
			select {
			case <-f.Ok():
			case <-f.Err():
				refused.Add(1)
			case <-time.After(5 * time.Second):
				refused.Add(1)
			}
		}
	}
	for i := 0; i < *floodMax && ctx.Err() == nil; i++ {
		var subj string
		var data []byte
		switch *mode {
		case "ids":
			call := fmt.Sprintf("fl-%s-%d", run, i)
			subj, data = "yesguard.transcript."+call, fmt.Appendf(nil, `{"call_id":%q,"source":%q,"speaker":"caller","type":"transcript","final":true,"text":"hi"}`, call, *source)
		case "subject":
			call := "fl-" + run
			subj, data = "yesguard.transcript."+call, fmt.Appendf(nil, `{"call_id":%q,"source":%q,"epoch":1,"seq":%d,"speaker":"caller","type":"transcript","final":false,"text":"flood"}`, call, *source, i+1)
		case "overrun":
			call := fmt.Sprintf("fl-%s-%d", run, i%5000)
			subj, data = "yesguard.transcript."+call, fmt.Appendf(nil, `{"call_id":%q,"source":%q,"speaker":"caller","type":"transcript","final":false,"text":%q}`, call, *source, text4k)
		}
		if *mode == "subject" || *mode == "overrun" {
			// As fast as the server takes them, no acks (the red team's).
			if fc.Publish(subj, data) != nil {
				return
			}
			if i%1000 == 0 {
				_ = fc.Flush()
			}
		} else {
			f, err := fjs.PublishAsync(subj, data)
			if err != nil {
				refused.Add(1)
				continue
			}
			pending = append(pending, f)
			reap(false)
		}
		sent.Add(1)
	}
	reap(true)
}

type result struct {
	mu        sync.Mutex
	lat       []time.Duration
	outcomes  map[string]int
	errs      map[string]int
	pubFailed int
	details   map[string]string
}

func (r *result) print() {
	slices.Sort(r.lat)
	q := func(p float64) time.Duration {
		if len(r.lat) == 0 {
			return 0
		}
		return r.lat[min(len(r.lat)-1, int(p*float64(len(r.lat))))]
	}
	n := len(r.lat)
	allowed := r.outcomes["OUTCOME_ALLOW/REASON_CONFIRMED"]
	errs := 0
	for _, v := range r.errs {
		errs += v
	}
	fmt.Printf("legit checks=%d answered_in_deadline=%d allowed=%d refused_or_error=%d p50=%s p99=%s max=%s publish_failed=%d\n",
		n, n-errs, allowed, n-allowed, q(0.5).Round(100*time.Microsecond), q(0.99).Round(100*time.Microsecond), q(1).Round(100*time.Microsecond), r.pubFailed)
	fmt.Printf("  outcomes=%v errors=%v\n", r.outcomes, r.errs)
	for k, v := range r.details {
		fmt.Printf("  first %s: %s\n", k, v)
	}
}

// legit runs the legitimate Checks: each a fresh call, a question and a
// yes published with acks, then a Check with the deadline.
func legit(guard yesguardv1.GuardClient, js jetstream.JetStream, run string) *result {
	r := &result{outcomes: map[string]int{}, errs: map[string]int{}, details: map[string]string{}}
	sem := make(chan struct{}, *conc)
	var wg sync.WaitGroup
	for i := range *checks {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			call := fmt.Sprintf("legit-%s-%d", run, i)
			ok := pub(js, call, 1, "agent", "Shall I submit your appeal now?") && pub(js, call, 2, "caller", "Yes, please.")
			args, _ := structpb.NewStruct(map[string]any{"appeal_id": "A-" + call})
			ctx, cancel := context.WithTimeout(context.Background(), *deadline)
			t0 := time.Now()
			resp, err := guard.Check(ctx, &yesguardv1.CheckRequest{CallId: call, Tool: "submit_appeal", Args: args})
			d := time.Since(t0)
			cancel()
			r.mu.Lock()
			defer r.mu.Unlock()
			if !ok {
				r.pubFailed++
			}
			r.lat = append(r.lat, d)
			if err != nil {
				r.errs[status.Code(err).String()]++
				return
			}
			k := resp.GetOutcome().String() + "/" + resp.GetReason().String()
			r.outcomes[k]++
			if _, ok := r.details[k]; !ok && k != "OUTCOME_ALLOW/REASON_CONFIRMED" {
				r.details[k] = fmt.Sprintf("%.200s", resp.GetDetail())
			}
		})
	}
	wg.Wait()
	return r
}

func pub(js jetstream.JetStream, call string, seq int, speaker, text string) bool {
	data := fmt.Appendf(nil, `{"call_id":%q,"source":"stt","epoch":1,"seq":%d,"speaker":%q,"type":"transcript","final":true,"text":%q,"lang":"en"}`, call, seq, speaker, text)
	id := fmt.Sprintf("%s.stt.1.%d", call, seq)
	for attempt := 0; attempt < 3; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := js.Publish(ctx, "yesguard.transcript."+call, data, jetstream.WithMsgID(id))
		cancel()
		if err == nil {
			return true
		}
	}
	return false
}

// stuff writes n records of about 55 KB on call (a tool that needs no
// confirmation: one ALLOW each).
func stuff(guard yesguardv1.GuardClient, call string) {
	blob := strings.Repeat("x", 55000)
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := range *records {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			args, _ := structpb.NewStruct(map[string]any{"n": i, "blob": blob})
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if _, err := guard.Check(ctx, &yesguardv1.CheckRequest{CallId: call, Tool: "note", Args: args}); err != nil {
				fmt.Fprintln(os.Stderr, "stuff:", err)
			}
		})
	}
	wg.Wait()
	fmt.Printf("stuffed %d records of ~55 KB on %s in %s\n", *records, call, time.Since(t0).Round(time.Millisecond))
}

// views reads the stuffed call again and again, as two auditors would:
// every ListDecisions page, then every call page.
func views(ctx context.Context, guard yesguardv1.GuardClient, call string) {
	var pages, bytes, maxPage, htmlPages, htmlBytes, maxHTML int
	defer func() {
		fmt.Printf("viewer: %d ListDecisions pages (%d bytes, largest %d), %d call pages (%d bytes, largest %d)\n", pages, bytes, maxPage, htmlPages, htmlBytes, maxHTML)
	}()
	for ctx.Err() == nil {
		for token := ""; ctx.Err() == nil; {
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			resp, err := guard.ListDecisions(rctx, &yesguardv1.ListDecisionsRequest{CallId: call, PageToken: token})
			cancel()
			if err != nil {
				fmt.Println("viewer: ListDecisions:", err)
				return
			}
			b, _ := json.Marshal(resp)
			pages++
			bytes += len(b)
			maxPage = max(maxPage, len(b))
			if token = resp.GetNextPageToken(); token == "" {
				break
			}
		}
		for u := "http://" + *httpAddr + "/calls/" + call; u != "" && ctx.Err() == nil; {
			resp, err := http.Get(u)
			if err != nil {
				fmt.Println("viewer: page:", err)
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			htmlPages++
			htmlBytes += len(b)
			maxHTML = max(maxHTML, len(b))
			u = ""
			if _, rest, ok := strings.Cut(string(b), `<a href="/calls/`+call+`?`); ok && strings.Contains(rest[:min(200, len(rest))], "Next records") {
				href, _, _ := strings.Cut(rest, `"`)
				u = "http://" + *httpAddr + "/calls/" + call + "?" + strings.ReplaceAll(href, "&amp;", "&")
			}
		}
	}
}

func metricsOf(addr string) string {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return "metrics: " + err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var keep []string
	for _, l := range strings.Split(string(b), "\n") {
		for _, p := range []string{"yesguard_transcript_limit_hits_total", "yesguard_transcript_calls_evicted_total", "yesguard_transcript_active_calls", "yesguard_decision_records_trimmed_total", "process_resident_memory_bytes", "yesguard_nats_reconnects_total"} {
			if strings.HasPrefix(l, p) {
				keep = append(keep, "  "+l)
			}
		}
	}
	return strings.Join(keep, "\n")
}
