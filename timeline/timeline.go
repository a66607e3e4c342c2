// Package timeline serves the call timeline page: what the guard saw and
// decided on one call, on one time axis, for the buyer who audits a refusal
// and the engineer who tunes a policy. GET /calls lists the recent calls;
// GET /calls/<call_id> shows one: the agent and caller turns by audio time
// and by arrival at the guard, each Check (when it came, how long it
// waited, its outcome and reason), the question sentence and the answer it
// relied on highlighted, what matched, the message given to the model, and
// for each refusal one line saying why.
//
// Rules that hold:
//   - The page is rendered from what ListDecisions answers (the records and,
//     with include_transcript, the turns), through the service's own
//     ListDecisions: the page, the CLI and a gRPC client see the same
//     records, redacted alike. The recent-calls list reads the decision
//     store's Recent.
//   - Everything shown is escaped by html/template: the transcript and the
//     arguments are the caller's and the model's words, attacker-controlled.
//     No script runs: the Content-Security-Policy allows none, and the
//     page needs none (styles are one embedded stylesheet).
//   - With a token file, every page needs a token holding the auditor role,
//     as ListDecisions does: `Authorization: Bearer <token>`, or the cookie
//     that the page's token form sets (HttpOnly, SameSite=Strict, scoped to
//     /calls). The token is looked up at every request, so a token removed
//     from the file (and SIGHUP) stops working at once. Without a token
//     file the pages are open, as the gRPC methods are. Either way the
//     service's ListDecisions is told who reads (an auth.Identity in the
//     context), as the gRPC interceptor tells it.
//   - Pages carry caller data: they are never cached (Cache-Control:
//     no-store) and never framed.
package timeline

import (
	"context"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/yesguard/yesguard/auth"
	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
)

// Lister is the service's ListDecisions (service.Service, or a gRPC
// client of a guard).
type Lister interface {
	ListDecisions(ctx context.Context, req *yesguardv1.ListDecisionsRequest) (*yesguardv1.ListDecisionsResponse, error)
}

// Recenter is the decision store's list of recent calls
// (decisions.Store.Recent).
type Recenter interface {
	Recent(ctx context.Context, limit int) ([]*yesguardv1.Decision, error)
}

// Config wires the pages.
type Config struct {
	// Decisions answers ListDecisions: the service itself.
	Decisions Lister
	// Recent lists the recent calls: the service's decision store.
	Recent Recenter
	// Tokens, when not nil, puts every page behind the auditor role.
	Tokens *auth.Tokens
	// RecentCalls is how many calls /calls lists (default 100).
	RecentCalls int
	// Logger for the errors a page shows as "try again"; nil: none.
	Logger *zap.Logger
	// Now is the clock for "how long ago"; nil means time.Now.
	Now func() time.Time
}

// Path is where the pages are mounted: /calls and /calls/<call_id>.
const Path = "/calls"

// Cookie is the name of the cookie the token form sets.
const Cookie = "yesguard_token"

// pageRecords is how many records one call page shows: one ListDecisions
// page of at most this many (and at most its byte budget), with a link to
// the next. What one view costs the guard is bounded so, however many and
// however large the call's records.
const pageRecords = 50

// requestTimeout bounds the store reads of one page.
const requestTimeout = 10 * time.Second

//go:embed assets
var assets embed.FS

var pages = template.Must(template.New("").Funcs(template.FuncMap{
	"callURL": callURL,
	"add":     func(a, b, c int) int { return a + b + c },
}).ParseFS(assets, "assets/*.html"))

// css is the stylesheet, served at /calls/timeline.css (a call id holds no
// '.', so no call can be named so).
var css = mustRead("assets/timeline.css")

func mustRead(name string) []byte {
	b, err := fs.ReadFile(assets, name)
	if err != nil {
		panic(err)
	}
	return b
}

// Handler serves the pages under Path.
type Handler struct {
	cfg Config
	mux *http.ServeMux
}

// New returns the pages' handler; mount it on Path and Path+"/".
func New(cfg Config) *Handler {
	if cfg.RecentCalls <= 0 {
		cfg.RecentCalls = 100
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	h := &Handler{cfg: cfg, mux: http.NewServeMux()}
	h.mux.HandleFunc("GET "+Path+"/timeline.css", h.stylesheet)
	h.mux.Handle("GET "+Path, h.guarded(h.list))
	h.mux.HandleFunc("POST "+Path, h.session)
	h.mux.Handle("GET "+Path+"/{call}", h.guarded(h.call))
	return h
}

// ServeHTTP serves a page, with the headers every page carries.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Cache-Control", "no-store")
	h.mux.ServeHTTP(w, r)
}

func (h *Handler) stylesheet(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/css; charset=utf-8")
	_, _ = w.Write(css)
}

// callURL is the page of a call; its id is path-escaped (an id may hold
// '/', '?', '#' or '%').
func callURL(id string) string { return Path + "/" + url.PathEscape(id) }

// list serves /calls: the recent calls, newest first. ?call=<id> opens
// that call (the page's form).
func (h *Handler) list(w http.ResponseWriter, r *http.Request) {
	if id := strings.TrimSpace(r.URL.Query().Get("call")); id != "" {
		http.Redirect(w, r, callURL(id), http.StatusSeeOther)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	recs, err := h.cfg.Recent.Recent(ctx, h.cfg.RecentCalls)
	if err != nil {
		h.cfg.Logger.Warn("timeline: recent calls not read", zap.Error(err))
		h.problem(w, r, http.StatusServiceUnavailable, "The decision store did not answer", "The list of recent calls could not be read: "+err.Error()+". Try again in a moment.")
		return
	}
	if id, _ := auth.FromContext(r.Context()); len(id.Calls) > 0 {
		// A token bound to calls lists only those (ListDecisions refuses
		// the others).
		recs = slices.DeleteFunc(slices.Clone(recs), func(d *yesguardv1.Decision) bool { return !id.MayCall(d.GetCallId()) })
	}
	h.render(w, r, http.StatusOK, "list.html", listPage(recs, h.cfg.Now(), h.signedIn(r)))
}

// call serves /calls/<call_id>.
func (h *Handler) call(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("call")
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	q := r.URL.Query()
	token := q.Get("page")
	first, _ := strconv.Atoi(q.Get("from"))
	first = max(first, 1)
	resp, err := h.cfg.Decisions.ListDecisions(ctx, &yesguardv1.ListDecisionsRequest{
		CallId: id, PageSize: pageRecords, PageToken: token, IncludeTranscript: true,
	})
	switch status.Code(err) {
	case codes.InvalidArgument:
		h.problem(w, r, http.StatusBadRequest, "Not a call id, or not a page of it", status.Convert(err).Message())
		return
	case codes.PermissionDenied, codes.Unauthenticated:
		h.problem(w, r, http.StatusForbidden, "This token may not read calls", status.Convert(err).Message())
		return
	}
	if err != nil {
		h.cfg.Logger.Warn("timeline: decisions not read", zap.String("call_id", id), zap.Error(err))
		h.problem(w, r, http.StatusServiceUnavailable, "The decision store did not answer", status.Convert(err).Message()+". Try again in a moment.")
		return
	}
	recs, turns := resp.GetDecisions(), resp.GetTranscript()
	if len(recs) == 0 && len(turns) == 0 {
		h.problem(w, r, http.StatusNotFound, "No such call",
			fmt.Sprintf("This guard holds no decision record and no transcript of call %q. Records are kept for a while after a call's last decision; check the call id.", id))
		return
	}
	v := callPage(id, recs, turns, first)
	if next := resp.GetNextPageToken(); next != "" {
		v.Next = callURL(id) + "?" + url.Values{"page": {next}, "from": {strconv.Itoa(first + len(recs))}}.Encode()
	}
	v.Paged = token != ""
	v.SignedIn = h.signedIn(r)
	h.render(w, r, http.StatusOK, "call.html", v)
}

// problemPage is an error page's content.
type problemPage struct {
	Title, Text string
	SignedIn    bool
}

func (h *Handler) problem(w http.ResponseWriter, r *http.Request, code int, title, text string) {
	h.render(w, r, code, "problem.html", problemPage{Title: title, Text: text, SignedIn: h.signedIn(r)})
}

// render executes a page into a buffer first, so that a template error
// becomes a 500 and never half a page.
func (h *Handler) render(w http.ResponseWriter, _ *http.Request, code int, name string, data any) {
	var b strings.Builder
	if err := pages.ExecuteTemplate(&b, name, data); err != nil {
		h.cfg.Logger.Error("timeline: page not rendered", zap.String("page", name), zap.Error(err))
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(b.String()))
}
