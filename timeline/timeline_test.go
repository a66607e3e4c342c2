package timeline_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/yesguard/yesguard/auth"
	"github.com/yesguard/yesguard/decisions"
	"github.com/yesguard/yesguard/dedupe"
	"github.com/yesguard/yesguard/guard"
	"github.com/yesguard/yesguard/patterns"
	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
	"github.com/yesguard/yesguard/service"
	"github.com/yesguard/yesguard/timeline"
	"github.com/yesguard/yesguard/transcript"
)

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

// guardOf is a real engine and service over a transcript store fed
// directly (the NATS path is the Chromium test's), and the pages over them.
type guardOf struct {
	t       *testing.T
	store   *transcript.Store
	records *decisions.Memory
	svc     *service.Service
	seq     uint64
}

func newGuard(t *testing.T) *guardOf {
	t.Helper()
	locs, err := patterns.LoadEmbedded()
	if err != nil {
		t.Fatal(err)
	}
	pol, err := guard.LoadPolicy("")
	if err != nil {
		t.Fatal(err)
	}
	store := transcript.NewStore(transcript.Limits{}, nil)
	book := dedupe.NewMemory(nil)
	eng, err := guard.New(guard.Config{Policy: pol, Locales: locs, Store: store, Book: book})
	if err != nil {
		t.Fatal(err)
	}
	records := decisions.NewMemory(decisions.MemoryLimits{})
	return &guardOf{t: t, store: store, records: records, svc: service.New(service.Config{Engine: eng, Book: book, Store: records})}
}

func (g *guardOf) pages(tokens *auth.Tokens) http.Handler {
	return timeline.New(timeline.Config{Decisions: roleChecked{g.svc}, Recent: g.records, Tokens: tokens})
}

// roleChecked is the service with its own role check in front, as
// auth.RequireRole puts one: the pages must tell it who reads.
type roleChecked struct{ svc *service.Service }

func (r roleChecked) ListDecisions(ctx context.Context, req *yesguardv1.ListDecisionsRequest) (*yesguardv1.ListDecisionsResponse, error) {
	if err := auth.RequireRole(ctx, auth.RoleAuditor); err != nil {
		return nil, err
	}
	return r.svc.ListDecisions(ctx, req)
}

func (g *guardOf) say(call string, sp transcript.Speaker, text string) {
	g.t.Helper()
	g.seq++
	if ok, why := g.store.Apply(transcript.Event{CallID: call, Seq: g.seq, Speaker: sp, Type: transcript.TypeTranscript, Text: text, Final: true, Lang: "en"}, time.Now()); !ok {
		g.t.Fatalf("event dropped: %s", why)
	}
}

func (g *guardOf) check(call, tool string, args map[string]any) *yesguardv1.CheckResponse {
	g.t.Helper()
	st, err := structpb.NewStruct(args)
	if err != nil {
		g.t.Fatal(err)
	}
	resp, err := g.svc.Check(auth.NewContext(context.Background(), auth.Identity{NoTokens: true}), &yesguardv1.CheckRequest{CallId: call, Tool: tool, Args: st})
	if err != nil {
		g.t.Fatal(err)
	}
	return resp
}

func get(t *testing.T, h http.Handler, path string, hdr ...string) (*http.Response, string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result(), rec.Body.String()
}

// hostile is transcript text, a tool name's arguments and a call id that
// would run script or make elements if they were not escaped.
const (
	hostileAgent  = `Shall I submit <script>alert("agent")</script> your appeal? <img src=x onerror=alert(1)>`
	hostileCaller = `Yes "><svg onload=alert(2)> <a href="javascript:alert(3)">ok</a> </textarea></mark>`
	hostileCall   = `c"<b'&x/y?z#w<i`
)

// TestPageEscapesHostileText: everything the caller, the agent and the
// model said is shown as text, in every context of the page (text,
// attributes, titles, links): no tag, attribute or script comes of it.
func TestPageEscapesHostileText(t *testing.T) {
	g := newGuard(t)
	g.say(hostileCall, transcript.Agent, hostileAgent)
	g.say(hostileCall, transcript.Caller, hostileCaller)
	g.check(hostileCall, "submit_appeal", map[string]any{"appeal_id": `"><script>alert(4)</script>`})
	h := g.pages(nil)

	resp, body := get(t, h, "/calls/"+url.PathEscape(hostileCall))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	doc, err := html.Parse(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var texts strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			switch n.Data {
			case "script", "img", "b", "i", "iframe", "textarea":
				t.Errorf("the page holds a <%s> element", n.Data)
			case "svg":
				if cls := attr(n, "class"); cls != "plot" {
					t.Errorf("the page holds an <svg class=%q>", cls)
				}
			}
			for _, a := range n.Attr {
				if strings.HasPrefix(a.Key, "on") || strings.HasPrefix(strings.TrimSpace(strings.ToLower(a.Val)), "javascript:") {
					t.Errorf("<%s %s=%q>", n.Data, a.Key, a.Val)
				}
			}
		}
		if n.Type == html.TextNode {
			texts.WriteString(n.Data)
			texts.WriteString("\n")
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	// The words as typed, in the text the browser shows.
	shown := texts.String()
	for _, want := range []string{`<script>alert("agent")</script>`, `<img src=x onerror=alert(1)>`, hostileCaller, hostileCall, `"><script>alert(4)</script>`} {
		if !strings.Contains(shown, want) {
			t.Errorf("the page does not show %q as text", want)
		}
	}
	_, list := get(t, h, "/calls")
	if want := `href="/calls/` + strings.ReplaceAll(url.PathEscape(hostileCall), "&", "&amp;") + `"`; !strings.Contains(list, want) {
		t.Errorf("recent calls do not link %s", want)
	}
	if strings.Contains(list, hostileCall) {
		t.Error("the list holds the call id unescaped")
	}
	for _, hd := range []string{"Content-Security-Policy", "X-Content-Type-Options", "Cache-Control", "X-Frame-Options"} {
		if resp.Header.Get(hd) == "" {
			t.Errorf("no %s header", hd)
		}
	}
}

// TestPageShowsTheDecision: a refusal's page holds its one line why, the
// question sentence and the answer highlighted, what matched and the
// message to the model.
func TestPageShowsTheDecision(t *testing.T) {
	g := newGuard(t)
	g.say("c1", transcript.Agent, "Thanks. ¿Quiere que envíe la apelación? Shall I submit your appeal now?")
	g.say("c1", transcript.Caller, "Yes. Wait, no.")
	resp := g.check("c1", "submit_appeal", nil)
	if resp.GetReason() != yesguardv1.Reason_REASON_NEGATED {
		t.Fatalf("reason %s", resp.GetReason())
	}
	_, body := get(t, g.pages(nil), "/calls/c1")
	for _, want := range []string{
		`<mark class="q">Shall I submit your appeal now?</mark>`,
		`<mark class="a">Yes. Wait, no.</mark>`,
		"The caller said no or changed their mind: negation &#34;wait&#34;.",
		"<span class=\"rule\">negation</span>",
		"Message to the model",
		resp.GetDecisionId(),
	} {
		want = strings.ReplaceAll(want, `\"`, `"`)
		if !strings.Contains(body, want) {
			t.Errorf("the page does not hold %s", want)
		}
	}
	if _, body := get(t, g.pages(nil), "/calls/nope"); !strings.Contains(body, "No such call") {
		t.Errorf("an unknown call's page: %s", body)
	}
	if resp, _ := get(t, g.pages(nil), "/calls/a.b"); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a call id with a dot: status %d, want 400", resp.StatusCode)
	}
}

// A yes to the guard's own question shows it as the guard's, by its id.
func TestPageShowsTheGuardQuestion(t *testing.T) {
	g := newGuard(t)
	g.say("c1", transcript.Agent, "One moment.")
	g.say("c1", transcript.Caller, "yes")
	refused := g.check("c1", "submit_appeal", nil)
	if refused.GetAsk() == nil {
		t.Fatalf("no ask: %s %s", refused.GetReason(), refused.GetDetail())
	}
	g.say("c1", transcript.Agent, refused.GetAsk().GetText())
	g.say("c1", transcript.Caller, "yes")
	if r := g.check("c1", "submit_appeal", nil); r.GetOutcome() != yesguardv1.Outcome_OUTCOME_ALLOW {
		t.Fatalf("%s %s", r.GetReason(), r.GetDetail())
	}
	_, body := get(t, g.pages(nil), "/calls/c1")
	if want := `<span class="guard-question">the guard's question (` + refused.GetAsk().GetId() + `)</span>`; !strings.Contains(body, want) {
		i := strings.LastIndex(body, "Question")
		t.Errorf("the page does not hold %s: %s", want, body[max(0, i-50):min(len(body), i+200)])
	}
}

// A Redeem's record shows as the backend's REDEEM, its message addressed
// to the backend; the list shows each call's ALLOW or REFUSE, not the
// duplicate, Complete or Redeem that followed it.
func TestPagesShowRedeemsAndTheOutcomeThatMatters(t *testing.T) {
	g := newGuard(t)
	g.say("r1", transcript.Agent, "Shall I submit your appeal now?")
	g.say("r1", transcript.Caller, "Yes.")
	allow := g.check("r1", "submit_appeal", map[string]any{"appeal_id": "A-17"})
	if allow.GetOutcome() != yesguardv1.Outcome_OUTCOME_ALLOW {
		t.Fatalf("outcome %s", allow.GetOutcome())
	}
	if dup := g.check("r1", "submit_appeal", map[string]any{"appeal_id": "A-17"}); dup.GetOutcome() != yesguardv1.Outcome_OUTCOME_DUPLICATE {
		t.Fatalf("the retry: %s", dup.GetOutcome())
	}
	ctx := auth.NewContext(context.Background(), auth.Identity{NoTokens: true})
	// A Redeem's record, as the service writes one (this service signs no
	// approvals).
	if err := g.records.Add(ctx, &yesguardv1.Decision{
		DecisionId: "01M8REDEEM0000000000000000", Time: timestamppb.Now(), CallId: "r1", Tool: "submit_appeal",
		Kind: yesguardv1.DecisionKind_DECISION_KIND_REDEEM, Outcome: yesguardv1.Outcome_OUTCOME_ALLOW, Reason: yesguardv1.Reason_REASON_REDEEMED,
		OriginalDecisionId: allow.GetDecisionId(), Message: "Redeemed: execute submit_appeal once, now.",
	}); err != nil {
		t.Fatal(err)
	}

	result, _ := structpb.NewStruct(map[string]any{"status": "filed"})
	if _, err := g.svc.Complete(ctx, &yesguardv1.CompleteRequest{DecisionId: allow.GetDecisionId(), Result: result}); err != nil {
		t.Fatal(err)
	}
	_, body := get(t, g.pages(nil), "/calls/r1")
	for _, want := range []string{`<span class="badge allow">REDEEM</span>`, "Message to the backend", "Message to the model", "Message to the pipeline"} {
		if !strings.Contains(body, want) {
			t.Errorf("the call's page does not hold %s", want)
		}
	}
	if strings.Count(body, `<span class="badge allow">ALLOW</span>`) != 1 {
		t.Errorf("the page shows %d ALLOW badges, want the Check's alone", strings.Count(body, `<span class="badge allow">ALLOW</span>`))
	}
	_, list := get(t, g.pages(nil), "/calls")
	row := list[strings.Index(list, `href="/calls/r1"`):]
	row = row[:strings.Index(row, "</tr>")]
	if !strings.Contains(row, `<span class="badge allow">ALLOW</span>`) {
		t.Errorf("the list's row of r1 does not show its ALLOW: %s", row)
	}
}

// tokens writes a token file with an auditor and a pipeline token.
func tokens(t *testing.T) (ts *auth.Tokens, auditor, pipeline string) {
	t.Helper()
	auditor, pipeline = auth.NewToken(), auth.NewToken()
	file := "tokens:\n" +
		"  - {name: audit-team, sha256: " + auth.HashToken(auditor) + ", roles: [auditor]}\n" +
		"  - {name: pipeline-eu, sha256: " + auth.HashToken(pipeline) + ", roles: [pipeline]}\n"
	path := filepath.Join(t.TempDir(), "tokens.yaml")
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	ts, err := auth.LoadTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	return ts, auditor, pipeline
}

// TestPagesNeedTheAuditorRole: with tokens, a page needs an auditor token,
// by header or by the token form's cookie; a browser without one gets the
// form.
func TestPagesNeedTheAuditorRole(t *testing.T) {
	g := newGuard(t)
	g.say("c1", transcript.Agent, "Shall I submit your appeal?")
	g.say("c1", transcript.Caller, "Yes.")
	g.check("c1", "submit_appeal", nil)
	ts, auditor, pipeline := tokens(t)
	h := g.pages(ts)

	resp, body := get(t, h, "/calls/c1")
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, `name="token"`) || strings.Contains(body, "Shall I submit") {
		t.Fatalf("no token: status %d, want 401 and the token form only:\n%s", resp.StatusCode, body)
	}
	if resp.Header.Get("WWW-Authenticate") == "" {
		t.Error("401 without WWW-Authenticate")
	}
	if resp, _ := get(t, h, "/calls/c1", "Authorization", "Bearer "+pipeline); resp.StatusCode != http.StatusForbidden {
		t.Errorf("pipeline token: status %d, want 403", resp.StatusCode)
	}
	if resp, _ := get(t, h, "/calls/c1", "Authorization", "Bearer nope"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("unknown token: status %d, want 401", resp.StatusCode)
	}
	if resp, body := get(t, h, "/calls/c1", "Authorization", "Bearer "+auditor); resp.StatusCode != http.StatusOK || !strings.Contains(body, "Shall I submit") {
		t.Errorf("auditor token: status %d, want the page", resp.StatusCode)
	}
	// The stylesheet is open: the form needs it.
	if resp, _ := get(t, h, "/calls/timeline.css"); resp.StatusCode != http.StatusOK {
		t.Errorf("stylesheet: status %d", resp.StatusCode)
	}

	// A browser: the form sets the cookie, which opens the pages.
	srv := httptest.NewServer(h)
	defer srv.Close()
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar}
	post := func(form url.Values, origin string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/calls", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return resp
	}
	page := func(path string) (int, string) {
		resp, err := client.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if r := post(url.Values{"token": {auditor}, "next": {"/calls/c1"}}, "http://evil.example"); r.StatusCode != http.StatusForbidden {
		t.Errorf("a form from another site: status %d, want 403", r.StatusCode)
	}
	if r := post(url.Values{"token": {pipeline}, "next": {"/calls/c1"}}, srv.URL); r.StatusCode != http.StatusForbidden {
		t.Errorf("signing in with a pipeline token: status %d, want 403", r.StatusCode)
	}
	if r := post(url.Values{"token": {auditor}, "next": {"//evil.example/x"}}, srv.URL); r.StatusCode != http.StatusOK || r.Request.URL.Path != "/calls" {
		t.Errorf("sign in with next=//evil.example: ended at %s (%d), want /calls", r.Request.URL, r.StatusCode)
	}
	u, _ := url.Parse(srv.URL + "/calls")
	var cookie *http.Cookie
	for _, c := range jar.Cookies(u) {
		if c.Name == timeline.Cookie {
			cookie = c
		}
	}
	if cookie == nil || cookie.Value != auditor {
		t.Fatalf("no session cookie after signing in: %v", jar.Cookies(u))
	}
	if code, body := page("/calls/c1"); code != http.StatusOK || !strings.Contains(body, "Shall I submit") || !strings.Contains(body, "Sign out") {
		t.Errorf("signed in: status %d, want the page with a sign-out button", code)
	}
	post(url.Values{"logout": {"1"}}, srv.URL)
	if code, _ := page("/calls/c1"); code != http.StatusUnauthorized {
		t.Errorf("signed out: status %d, want 401", code)
	}
}
