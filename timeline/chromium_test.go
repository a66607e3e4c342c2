package timeline_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"

	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
	"github.com/yesguard/yesguard/server"
	"github.com/yesguard/yesguard/server/servertest"
)

// chromiumFlags are the flags headless Chromium needs on these machines
// (no sandbox as root, no GPU, no network of its own).
var chromiumFlags = []string{
	"headless", "no-sandbox", "disable-gpu", "disable-quic", "no-first-run",
	"disable-background-networking", "disable-component-update", "disable-sync",
}

// chromium is the browser the test drives: $YESGUARD_CHROMIUM, else
// chromium on PATH. The test skips only when neither is there; .ci/run
// sets the variable, so CI never skips.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("YESGUARD_CHROMIUM"); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("YESGUARD_CHROMIUM=%s: %v", p, err)
		}
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no Chromium: set YESGUARD_CHROMIUM or install Debian's chromium (apt-get install -y --no-install-recommends chromium); .ci/run does")
	return ""
}

// browser starts headless Chromium with a fresh profile, scripts off: the
// page must work without JavaScript.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{chromedp.ExecPath(chromium(t)), chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900)}
	for _, f := range chromiumFlags {
		opts = append(opts, chromedp.Flag(f, true))
	}
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	ctx, cancel = context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx,
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := cdp.Call(ctx, tg, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true})
			return err
		}),
		chromedp.EmulateViewport(1280, 900),
	); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// call is a guard driven over its public contract: transcript events on
// NATS, Check over gRPC.
type call struct {
	t     *testing.T
	nc    *nats.Conn
	guard yesguardv1.GuardClient
	reg   *prometheus.Registry
	id    string
	seq   uint64
	base  string // the HTTP server's URL
}

func (c *call) say(speaker, text string, startMS, endMS int64) {
	c.t.Helper()
	c.seq++
	ev := map[string]any{"call_id": c.id, "seq": c.seq, "speaker": speaker, "type": "transcript", "text": text, "final": true, "lang": "en",
		"start_ms": startMS, "end_ms": endMS}
	b, _ := json.Marshal(ev)
	if err := c.nc.Publish(server.DefaultSubjectPrefix+"."+c.id, b); err != nil {
		c.t.Fatal(err)
	}
	if err := c.nc.Flush(); err != nil {
		c.t.Fatal(err)
	}
}

// raced starts a Check, waits until the guard holds it in flight, then the
// caller's answer lands: the tool call outruns the transcript, as in a
// real pipeline.
func (c *call) raced(answer string, startMS, endMS int64) *yesguardv1.CheckResponse {
	c.t.Helper()
	// Everything said so far is in the guard first: a Check on a call
	// whose events have not been applied yet is refused at once (a loaded
	// machine), which is not the race this test draws.
	deadline := time.Now().Add(10 * time.Second)
	for eventsSeen(c.t, c.reg) < float64(c.seq) {
		if time.Now().After(deadline) {
			c.t.Fatalf("the guard took in %v of the call's %d events", eventsSeen(c.t, c.reg), c.seq)
		}
		time.Sleep(time.Millisecond) // synchronisation only
	}
	before := inFlight(c.t, c.reg)
	type res struct {
		r   *yesguardv1.CheckResponse
		err error
	}
	ch := make(chan res, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		args, _ := structpb.NewStruct(map[string]any{"appeal_id": "A-17"})
		r, err := c.guard.Check(ctx, &yesguardv1.CheckRequest{CallId: c.id, Tool: "submit_appeal", Args: args})
		ch <- res{r, err}
	}()
	deadline = time.Now().Add(10 * time.Second)
	for inFlight(c.t, c.reg) <= before {
		select {
		case got := <-ch:
			c.t.Fatalf("the Check was answered before the caller spoke: %v %s/%s (%s)", got.err, got.r.GetOutcome(), got.r.GetReason(), got.r.GetDetail())
		default:
		}
		if time.Now().After(deadline) {
			c.t.Fatal("the Check never got in flight")
		}
		time.Sleep(time.Millisecond) // synchronisation only: what is asserted is the page
	}
	// The pipeline's lag: the caller's words reach NATS a while after the
	// model's tool call. A margin, not a measure: the test asserts only
	// that the page shows the wait the answer reported.
	time.Sleep(pipelineLag)
	c.say("caller", answer, startMS, endMS)
	got := <-ch
	if got.err != nil {
		c.t.Fatal(got.err)
	}
	return got.r
}

// pipelineLag is how long after the Check the caller's answer is
// published, as probe's --lag.
const pipelineLag = 250 * time.Millisecond

// eventsSeen is the transcript events the guard has taken in, applied or
// rejected.
func eventsSeen(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if n := mf.GetName(); n == "yesguard_transcript_events_total" || n == "yesguard_transcript_events_rejected_total" {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

func inFlight(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "yesguard_guard_checks_in_flight" {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatal("no yesguard_guard_checks_in_flight")
	return 0
}

// startGuard starts a real guard with its HTTP server, and a call on it.
func startGuard(t *testing.T, id string) *call {
	t.Helper()
	reg := prometheus.NewRegistry()
	srv := servertest.Start(t, servertest.Options{Registry: reg, Config: func(c *server.Config) { c.HTTPAddr = "127.0.0.1:0" }})
	nc, err := nats.Connect(srv.NATSURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	cc, err := grpc.NewClient(srv.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return &call{t: t, nc: nc, guard: yesguardv1.NewGuardClient(cc), reg: reg, id: id, base: "http://" + srv.HTTPAddr()}
}

// artefacts is where the screenshot goes: $YESGUARD_ARTIFACTS (.ci/run
// names it), else a directory under the system's temp dir, kept after the
// test.
func artefacts(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("YESGUARD_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "yesguard-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestTimelineInChromium drives a refused and an allowed Check through
// NATS and gRPC against a real guard, opens the call's page in headless
// Chromium with scripts off, checks what it shows, and saves a screenshot.
func TestTimelineInChromium(t *testing.T) {
	// The guard first: cleanups run last first, so the browser, and the
	// connections it holds open, are gone before the guard stops.
	c := startGuard(t, "buyer-demo-1")
	ctx := browser(t)

	c.say("agent", "Thanks, I have everything I need for your appeal.", 0, 2400)
	c.say("agent", "Shall I submit your appeal now?", 2400, 4100)
	refused := c.raced("Yes. Wait, no.", 4700, 6200)
	if refused.GetOutcome() != yesguardv1.Outcome_OUTCOME_REFUSE || refused.GetReason() != yesguardv1.Reason_REASON_NEGATED {
		t.Fatalf("first Check: %s/%s, want REFUSE/NEGATED", refused.GetOutcome(), refused.GetReason())
	}
	c.say("agent", "No problem. Would you like me to submit the appeal now?", 6600, 9800)
	allowed := c.raced("Yes, please.", 10300, 11200)
	if allowed.GetOutcome() != yesguardv1.Outcome_OUTCOME_ALLOW {
		t.Fatalf("second Check: %s/%s (%s), want ALLOW", allowed.GetOutcome(), allowed.GetReason(), allowed.GetDetail())
	}

	page := c.base + "/calls/" + c.id
	if err := chromedp.Do(ctx, chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS(".story"))); err != nil {
		t.Fatalf("open %s: %v", page, err)
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("%s: %v", sel, err)
		}
		return strings.TrimSpace(s)
	}
	// The refused probe's one line why.
	if got := text(".refusals li"); !strings.Contains(got, "negated") || !strings.Contains(got, "The caller said no or changed their mind") || !strings.Contains(got, `"wait"`) {
		t.Errorf("the refusal's line reads %q, want its reason and why", got)
	}
	// The highlighted question sentence and the answer it relied on, in
	// the refused Check's card.
	if got := text("#decision-1 mark.q"); got != "Shall I submit your appeal now?" {
		t.Errorf("highlighted question %q", got)
	}
	if got := text("#decision-1 mark.a"); got != "Yes. Wait, no." {
		t.Errorf("highlighted answer %q", got)
	}
	// The wait: the Check came before the answer, so it waited.
	waited := text("#decision-1 .waited")
	m := regexp.MustCompile(`^(\d+) ms$`).FindStringSubmatch(waited)
	if m == nil {
		t.Fatalf("waited reads %q", waited)
	}
	if n, _ := strconv.Atoi(m[1]); n != int(refused.GetWaitedMs()) || n == 0 {
		t.Errorf("waited %d ms on the page, %d ms in the answer; want the same, above 0", n, refused.GetWaitedMs())
	}
	if got := text("#decision-1 .message p"); got != refused.GetMessage() {
		t.Errorf("message to the model %q, want %q", got, refused.GetMessage())
	}
	if got := text("#decision-2 .badge"); got != "ALLOW" {
		t.Errorf("second decision's badge %q", got)
	}
	// Both axes are drawn: arrival (with the checks) and audio time.
	if n, err := chromedp.Run(ctx, chromedp.Nodes(chromedp.CSSAll("svg.plot rect.mark"))); err != nil || len(n) != 2*4+2 {
		t.Errorf("%d marks on the axes (%v), want the 4 turns on both axes and the 2 checks", len(n), err)
	}
	if n, _ := chromedp.Run(ctx, chromedp.Nodes(chromedp.CSSAll("script"), chromedp.AtLeast(0))); len(n) != 0 {
		t.Errorf("the page holds %d scripts, want none", len(n))
	}

	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(artefacts(t), "timeline-call.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("timeline screenshot: %s\n", path)

	// The list of recent calls links the call.
	if err := chromedp.Do(ctx, chromedp.Navigate(c.base+"/calls"), chromedp.WaitVisible(chromedp.CSS("table.calls"))); err != nil {
		t.Fatal(err)
	}
	if got := text("table.calls tbody tr"); !strings.Contains(got, c.id) || !strings.Contains(got, "ALLOW") {
		t.Errorf("recent calls row %q, want the call and its last decision", got)
	}
	shot, err = chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err == nil {
		_ = os.WriteFile(filepath.Join(artefacts(t), "timeline-list.png"), shot, 0o644)
	}
}

// TestTimelineHostileTextInChromium: words from the transcript that look
// like markup are shown as words, in a real browser: no element, no
// script, no request comes of them.
func TestTimelineHostileTextInChromium(t *testing.T) {
	c := startGuard(t, `x"<img-src=x-onerror=alert(1)/`)
	ctx := browser(t)
	c.say("agent", `Shall I submit <img src=x onerror="document.title='owned'"> your appeal?</mark><script>document.title='owned'</script>`, 0, 1000)
	c.raced(`Yes <b>please</b> <a href="javascript:alert(1)">go</a>`, 1200, 1900)

	if err := chromedp.Do(ctx, chromedp.Navigate(c.base+"/calls/"+url.PathEscape(c.id)), chromedp.WaitVisible(chromedp.CSS(".story"))); err != nil {
		t.Fatal(err)
	}
	title, err := chromedp.Run(ctx, chromedp.Title())
	if err != nil || strings.Contains(title, "owned") {
		t.Fatalf("title %q (%v): a script ran", title, err)
	}
	for _, sel := range []string{".words img", ".words script", ".words b", ".words a", "img"} {
		if n, _ := chromedp.Run(ctx, chromedp.Nodes(chromedp.CSSAll(sel), chromedp.AtLeast(0))); len(n) != 0 {
			t.Errorf("%s: %d elements made from the transcript", sel, len(n))
		}
	}
	words, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(".turn.caller .words")))
	if err != nil || !strings.Contains(words, `<a href="javascript:alert(1)">go</a>`) {
		t.Errorf("caller's words shown as %q (%v), want them as typed", words, err)
	}
	if h1, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("h1 .callid"))); h1 != c.id {
		t.Errorf("call id shown as %q, want %q", h1, c.id)
	}
	resp, err := http.Get(c.base + "/calls/" + url.PathEscape(c.id))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
}
