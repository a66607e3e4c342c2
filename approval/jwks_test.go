package approval

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestJWKSHandler(t *testing.T) {
	f := newFixture(t)
	srv := httptest.NewServer(JWKSHandler(f.keys, 0))
	t.Cleanup(srv.Close)

	resp, err := http.Get(srv.URL + JWKSPath)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET: %s", resp.Status)
	}
	if ct := resp.Header.Get("Content-Type"); ct != JWKSContentType {
		t.Errorf("Content-Type %q", ct)
	}
	if cc := resp.Header.Get("Cache-Control"); cc != "public, max-age=300" {
		t.Errorf("Cache-Control %q", cc)
	}
	etag := resp.Header.Get("ETag")
	if !strings.HasPrefix(etag, `"`) || len(etag) < 10 {
		t.Errorf("ETag %q", etag)
	}

	var doc struct {
		Keys []map[string]any `json:"keys"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Keys) != 1 {
		t.Fatalf("keys: %s", body)
	}
	k := doc.Keys[0]
	pub := f.keys.Keys()[0].Public
	for name, want := range map[string]any{"kty": "OKP", "crv": "Ed25519", "kid": "k1", "alg": "EdDSA", "use": "sig", "x": b64(pub)} {
		if k[name] != want {
			t.Errorf("%s = %v, want %v", name, k[name], want)
		}
	}
	if _, ok := k["d"]; ok || len(k) != 6 {
		t.Errorf("the published key holds more than its public half: %v", k)
	}

	// A token verifies with what was served.
	token, _ := f.sign(t, testApproval(t))
	if _, err := mustJWKSVerifier(t, body, f.clock).VerifyFor(token, "submit_appeal", testArgs); err != nil {
		t.Errorf("verify with the served JWKS: %v", err)
	}

	do := func(method string, header map[string]string) *http.Response {
		req, _ := http.NewRequest(method, srv.URL+JWKSPath, nil)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	if r := do(http.MethodGet, map[string]string{"If-None-Match": etag}); r.StatusCode != http.StatusNotModified {
		t.Errorf("If-None-Match its ETag: %s", r.Status)
	}
	if r := do(http.MethodGet, map[string]string{"If-None-Match": `"other", W/` + etag}); r.StatusCode != http.StatusNotModified {
		t.Errorf("If-None-Match a list with its weak ETag: %s", r.Status)
	}
	if r := do(http.MethodGet, map[string]string{"If-None-Match": `"other"`}); r.StatusCode != http.StatusOK {
		t.Errorf("If-None-Match another ETag: %s", r.Status)
	}
	if r := do(http.MethodHead, nil); r.StatusCode != http.StatusOK || r.Header.Get("Content-Length") != itoa(len(body)) {
		t.Errorf("HEAD: %s, length %q", r.Status, r.Header.Get("Content-Length"))
	}
	if r := do(http.MethodPost, nil); r.StatusCode != http.StatusMethodNotAllowed || r.Header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST: %s, Allow %q", r.Status, r.Header.Get("Allow"))
	}

	// A new key changes the document and its ETag.
	if err := f.keys.SetKeys([]Key{{ID: "k1", Private: f.keys.set.Load().byID["k1"].Private}, newKey(t, "k2", f.clock.Now().Add(time.Hour))}); err != nil {
		t.Fatal(err)
	}
	if r := do(http.MethodGet, map[string]string{"If-None-Match": etag}); r.StatusCode != http.StatusOK || r.Header.Get("ETag") == etag {
		t.Errorf("after a new key: %s, ETag %q", r.Status, r.Header.Get("ETag"))
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestParseJWKS(t *testing.T) {
	f := newFixture(t)
	ed := string(f.keys.JWKS())
	x := b64(f.keys.Keys()[0].Public)
	good := func(kid, extra string) string {
		return `{"kty":"OKP","crv":"Ed25519","kid":"` + kid + `","x":"` + x + `"` + extra + `}`
	}
	rsaLike := `{"kty":"EC","crv":"P-256","kid":"ec","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}`
	cases := []struct {
		name string
		doc  string
		ok   bool
		kids []string
	}{
		{"the guard's", ed, true, []string{"k1"}},
		{"alg and use absent", `{"keys":[` + good("a", "") + `]}`, true, []string{"a"}},
		{"another service's EC key skipped", `{"keys":[` + rsaLike + `,` + good("a", `,"alg":"EdDSA"`) + `]}`, true, []string{"a"}},
		{"an encryption key skipped", `{"keys":[` + good("enc", `,"use":"enc"`) + `,` + good("a", "") + `]}`, true, []string{"a"}},
		{"only keys of others", `{"keys":[` + rsaLike + `]}`, false, nil},
		{"empty", `{"keys":[]}`, false, nil},
		{"not JSON", `keys`, false, nil},
		{"a kid twice", `{"keys":[` + good("a", "") + `,` + good("a", "") + `]}`, false, nil},
		{"a private key", `{"keys":[` + good("a", `,"d":"`+b64(f.keys.set.Load().byID["k1"].Private.Seed())+`"`) + `]}`, false, nil},
		{"a secret key", `{"keys":[{"kty":"oct","kid":"s","k":"c2VjcmV0"}]}`, false, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			set, err := ParseJWKS([]byte(tc.doc))
			if (err == nil) != tc.ok {
				t.Fatalf("ParseJWKS: %v, want ok %v", err, tc.ok)
			}
			for _, kid := range tc.kids {
				if _, err := set.VerificationKey(kid); err != nil {
					t.Errorf("key %q: %v", kid, err)
				}
			}
			if set != nil {
				if _, err := set.VerificationKey("nope"); !errors.Is(err, ErrUnknownKey) {
					t.Errorf("an unknown kid: %v", err)
				}
			}
		})
	}
}

// jwksServer serves a key set's JWKS and counts the fetches; fail makes it
// answer 503.
type jwksServer struct {
	*httptest.Server
	fetches atomic.Int64
	fail    atomic.Bool
}

func (s *jwksServer) wantFetches(t *testing.T, want int64, when string) {
	t.Helper()
	if n := s.fetches.Load(); n != want {
		t.Errorf("%d fetches %s, want %d", n, when, want)
	}
}

func newJWKSServer(t *testing.T, keys *KeySet) *jwksServer {
	s := &jwksServer{}
	h := JWKSHandler(keys, 2*time.Minute)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.fetches.Add(1)
		if s.fail.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func TestRemoteJWKSRefreshIsBounded(t *testing.T) {
	f := newFixture(t)
	srv := newJWKSServer(t, f.keys)
	url := srv.URL + JWKSPath
	remote, err := NewRemoteJWKS(context.Background(), url, RemoteOptions{Now: f.clock.Now, MinRefresh: 30 * time.Second, MaxRefresh: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	v := NewVerifier(remote, f.opts)
	token, _ := f.sign(t, testApproval(t))
	if _, err := v.Verify(token); err != nil {
		t.Fatal(err)
	}
	if n := srv.fetches.Load(); n != 1 {
		t.Fatalf("%d fetches after start and one verify, want 1", n)
	}

	// Tokens with made-up key ids: one refetch, then none until
	// MinRefresh has passed.
	stranger, _ := NewKeySet([]Key{newKey(t, "k-made-up", time.Time{})}, KeySetOptions{Now: f.clock.Now})
	strange, _, _ := NewSigner(stranger, SignerOptions{}).Sign(testApproval(t))
	f.clock.Advance(31 * time.Second)
	for range 50 {
		if _, err := v.Verify(strange); !errors.Is(err, ErrUnknownKey) {
			t.Fatalf("a made-up kid: %v", err)
		}
	}
	srv.wantFetches(t, 2, "after 50 unknown kids")

	// A key that starts signing is found by the refetch on its kid, once
	// MinRefresh allows.
	k1 := f.keys.set.Load().byID["k1"].Private
	if err := f.keys.SetKeys([]Key{{ID: "k1", Private: k1}, newKey(t, "k2", f.clock.Now())}); err != nil {
		t.Fatal(err)
	}
	long := testApproval(t)
	long.TTL = DefaultMaxTTL // outlives the clock's moves below
	token2, c2 := f.sign(t, long)
	if c2.KeyID != "k2" {
		t.Fatalf("signed with %q", c2.KeyID)
	}
	if _, err := v.Verify(token2); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("within MinRefresh of the last fetch: %v, want ErrUnknownKey", err)
	}
	f.clock.Advance(30 * time.Second)
	if _, err := v.Verify(token2); err != nil {
		t.Errorf("a new key after MinRefresh: %v", err)
	}
	srv.wantFetches(t, 3, "so far")

	// Within max-age (2 minutes) a known key costs no fetch; past it, one
	// revalidation (304), and the guard being down keeps the cached keys.
	for range 10 {
		v.Verify(token2)
	}
	srv.wantFetches(t, 3, "for known keys within max-age")
	srv.fail.Store(true)
	f.clock.Advance(2*time.Minute + time.Second)
	if _, err := v.Verify(token2); err != nil {
		t.Errorf("the guard down, cached keys: %v", err)
	}
	if remote.LastError() == nil {
		t.Error("LastError is nil after a failed fetch")
	}
	srv.wantFetches(t, 4, "so far")
	// A failed fetch is retried after MinRefresh, not on every verify.
	for range 10 {
		v.Verify(token2)
	}
	srv.wantFetches(t, 4, "right after a failure")
	srv.fail.Store(false)
	f.clock.Advance(30 * time.Second)
	v.Verify(token2)
	if n := srv.fetches.Load(); n != 5 || remote.LastError() != nil {
		t.Errorf("%d fetches, last error %v; want 5 and none", n, remote.LastError())
	}
}

func TestRemoteJWKSUnavailable(t *testing.T) {
	f := newFixture(t)
	srv := newJWKSServer(t, f.keys)
	srv.fail.Store(true)
	if _, err := NewRemoteJWKS(context.Background(), srv.URL+JWKSPath, RemoteOptions{Now: f.clock.Now}); !errors.Is(err, ErrKeysUnavailable) {
		t.Errorf("a guard that answers 503: %v, want ErrKeysUnavailable", err)
	}
	notJWKS := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"keys":"no"}`) }))
	t.Cleanup(notJWKS.Close)
	if _, err := NewRemoteJWKS(context.Background(), notJWKS.URL, RemoteOptions{}); !errors.Is(err, ErrKeysUnavailable) {
		t.Errorf("a document that is no JWKS: %v, want ErrKeysUnavailable", err)
	}
	huge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"keys":[`+strings.Repeat(" ", maxJWKSBytes)+`]}`)
	}))
	t.Cleanup(huge.Close)
	if _, err := NewRemoteJWKS(context.Background(), huge.URL, RemoteOptions{}); !errors.Is(err, ErrKeysUnavailable) {
		t.Errorf("a document over the limit: %v, want ErrKeysUnavailable", err)
	}
}
