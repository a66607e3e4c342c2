package server

import (
	"errors"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/yesguard/yesguard/auth"
)

// The token form's next= is where the browser goes after signing in: on
// the real guard, whose HTTP listener serves /metrics and the JWKS beside
// the pages, every spelling that a browser would resolve outside /calls
// (dot segments, encoded ones, backslashes, another host) lands on /calls,
// and a destination under /calls is kept, normalised.
func TestSignInStaysUnderCalls(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.yaml")
	toks := writeTokens(t, path, map[string][]auth.Role{"audit": {auth.RoleAuditor}})
	srv, _, _ := startConfigured(t, func(c *Config) { c.GRPCTokens = path })
	base := "http://" + srv.HTTPAddr()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	signIn := func(next string) string {
		t.Helper()
		form := url.Values{"token": {toks["audit"]}, "next": {next}}
		resp, err := client.PostForm(base+"/calls", form)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("sign in with next=%q: status %d, want 303", next, resp.StatusCode)
		}
		loc, err := resp.Location()
		if errors.Is(err, http.ErrNoLocation) {
			t.Fatalf("sign in with next=%q: no Location", next)
		}
		// Where a browser goes: the Location resolved as the URL standard
		// does (dot segments removed, a backslash read as a slash).
		resolved, err := url.Parse(base + "/calls")
		if err != nil {
			t.Fatal(err)
		}
		ref, err := url.Parse(strings.ReplaceAll(resp.Header.Get("Location"), `\`, "/"))
		if err != nil {
			t.Fatalf("Location %q: %v", resp.Header.Get("Location"), err)
		}
		to := resolved.ResolveReference(ref)
		if to.Host != srv.HTTPAddr() || (to.Path != "/calls" && !strings.HasPrefix(to.Path, "/calls/")) {
			t.Errorf("sign in with next=%q: Location %q takes the browser to %s, outside /calls", next, loc, to)
		}
		return resp.Header.Get("Location")
	}
	for _, next := range []string{
		"/calls/../metrics", "/calls/%2e%2e/metrics", "/calls/%2E%2E/.well-known/jwks.json", "/calls/..%2fmetrics",
		"/calls/./../../metrics", `/calls/..\metrics`, `/calls\..\metrics`, "/calls/c1/../../readyz",
		"//evil.example/calls", `/\evil.example/calls`, "https://evil.example/calls", "calls/c1", "",
	} {
		signIn(next)
	}
	for next, want := range map[string]string{
		"/calls/c1":                  "/calls/c1",
		"/calls/c1?from=list#turn-3": "/calls/c1?from=list",
		"/calls/./c1":                "/calls/c1",
		"/calls/x/../c1":             "/calls/c1",
		"/calls/":                    "/calls",
	} {
		if got := signIn(next); got != want {
			t.Errorf("sign in with next=%q: Location %q, want %q", next, got, want)
		}
	}
}
