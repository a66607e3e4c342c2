package approval

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Defaults of RemoteOptions.
const (
	DefaultMinRefresh   = 30 * time.Second
	DefaultMaxRefresh   = time.Hour
	DefaultFetchTimeout = 5 * time.Second
)

// RemoteOptions configures a RemoteJWKS. Zero fields take the defaults.
type RemoteOptions struct {
	// Client fetches the document; default http.DefaultClient (each fetch
	// is bounded by Timeout anyway).
	Client *http.Client
	// Timeout bounds one fetch; default DefaultFetchTimeout.
	Timeout time.Duration
	// MinRefresh is the least time between two fetches, whatever asks for
	// them (an unknown kid, a failed fetch): a flood of tokens with made-up
	// key ids costs one fetch per MinRefresh, not one each. Default
	// DefaultMinRefresh.
	MinRefresh time.Duration
	// MaxRefresh is the longest a fetched document is used before it is
	// fetched again, whatever its Cache-Control says; a key the guard drops
	// goes from the cache within it. Default DefaultMaxRefresh.
	MaxRefresh time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// RemoteJWKS is a JWKS fetched from a URL (the guard's JWKSPath) and
// cached: kept for the document's Cache-Control max-age, held between
// MinRefresh and MaxRefresh, fetched again early for a kid it does not
// hold (a key that started signing since), revalidated with its ETag.
// When a fetch fails the last good document stays in use; before any
// fetch has succeeded every key is ErrKeysUnavailable. It is a KeySource,
// safe for concurrent use.
type RemoteJWKS struct {
	url  string
	opts RemoteOptions

	// fetchMu is held by the one goroutine fetching; others wait for it
	// (an unknown kid) or go on with the cached set (a known kid).
	fetchMu sync.Mutex

	mu sync.Mutex // guards the fields below
	remoteState
}

type remoteState struct {
	set        *JWKS
	etag       string
	attemptAt  time.Time // the last fetch, good or bad
	freshUntil time.Time
	lastErr    error
}

// NewRemoteJWKS fetches the JWKS at url once, and fails when that fails,
// so a backend learns at start that it cannot verify.
func NewRemoteJWKS(ctx context.Context, url string, opts RemoteOptions) (*RemoteJWKS, error) {
	if opts.Client == nil {
		opts.Client = http.DefaultClient
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultFetchTimeout
	}
	if opts.MinRefresh <= 0 {
		opts.MinRefresh = DefaultMinRefresh
	}
	if opts.MaxRefresh < opts.MinRefresh {
		opts.MaxRefresh = max(DefaultMaxRefresh, opts.MinRefresh)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	r := &RemoteJWKS{url: url, opts: opts}
	r.fetchMu.Lock()
	r.fetch(ctx)
	r.fetchMu.Unlock()
	if st := r.state(); st.set == nil {
		return nil, fmt.Errorf("%w: %w", ErrKeysUnavailable, st.lastErr)
	}
	return r, nil
}

func (r *RemoteJWKS) state() remoteState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.remoteState
}

// VerificationKey is the key for kid, fetching the document again when it
// is stale or lacks kid, within the refresh bounds.
func (r *RemoteJWKS) VerificationKey(kid string) (ed25519.PublicKey, error) {
	st := r.state()
	_, known := st.set.lookup(kid)
	now := r.opts.Now()
	switch {
	case known && now.Before(st.freshUntil):
	case known:
		// Stale: one caller refreshes, the others use the cached keys.
		if r.fetchMu.TryLock() {
			if r.state().attemptAt.Equal(st.attemptAt) {
				r.fetch(context.Background())
			}
			r.fetchMu.Unlock()
		}
	default:
		r.fetchMu.Lock()
		if cur := r.state(); cur.attemptAt.Equal(st.attemptAt) && !now.Before(cur.attemptAt.Add(r.opts.MinRefresh)) {
			r.fetch(context.Background())
		}
		r.fetchMu.Unlock()
	}
	st = r.state()
	if pub, ok := st.set.lookup(kid); ok {
		return pub, nil
	}
	if st.set == nil {
		return nil, fmt.Errorf("%w: %v", ErrKeysUnavailable, st.lastErr)
	}
	return nil, fmt.Errorf("%w: key id %q is not in the JWKS at %s", ErrUnknownKey, kid, r.url)
}

func (j *JWKS) lookup(kid string) (ed25519.PublicKey, bool) {
	if j == nil {
		return nil, false
	}
	pub, ok := j.keys[kid]
	return pub, ok
}

// fetch gets the document once and records the outcome. The caller holds
// fetchMu.
func (r *RemoteJWKS) fetch(ctx context.Context) {
	start := r.opts.Now()
	set, etag, maxAge, err := r.get(ctx, r.state().etag)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.attemptAt = start
	if err != nil {
		r.lastErr = err
		r.freshUntil = start.Add(r.opts.MinRefresh)
		return
	}
	if set != nil {
		r.set, r.etag = set, etag
	}
	r.lastErr = nil
	r.freshUntil = start.Add(min(max(maxAge, r.opts.MinRefresh), r.opts.MaxRefresh))
}

// get fetches the document; a nil set with no error is "not modified".
func (r *RemoteJWKS) get(ctx context.Context, etag string) (*JWKS, string, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, r.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.url, nil)
	if err != nil {
		return nil, "", 0, fmt.Errorf("jwks %s: %w", r.url, err)
	}
	req.Header.Set("Accept", JWKSContentType+", application/json")
	if etag != "" {
		req.Header.Set("If-None-Match", etag)
	}
	resp, err := r.opts.Client.Do(req)
	if err != nil {
		return nil, "", 0, fmt.Errorf("jwks: %w", err)
	}
	defer resp.Body.Close()
	maxAge := cacheMaxAge(resp.Header.Get("Cache-Control"))
	switch resp.StatusCode {
	case http.StatusNotModified:
		if etag == "" {
			return nil, "", 0, fmt.Errorf("jwks %s: 304 to a request without an ETag", r.url)
		}
		return nil, "", maxAge, nil
	case http.StatusOK:
	default:
		return nil, "", 0, fmt.Errorf("jwks %s: HTTP %s", r.url, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes+1))
	if err != nil {
		return nil, "", 0, fmt.Errorf("jwks %s: %w", r.url, err)
	}
	set, err := ParseJWKS(body)
	if err != nil {
		return nil, "", 0, fmt.Errorf("%s: %w", r.url, err)
	}
	return set, resp.Header.Get("ETag"), maxAge, nil
}

// cacheMaxAge reads max-age from a Cache-Control header; 0 when absent, or
// when no-store or no-cache says not to keep the document.
func cacheMaxAge(header string) time.Duration {
	var age time.Duration
	for _, d := range strings.Split(header, ",") {
		d = strings.ToLower(strings.TrimSpace(d))
		switch {
		case d == "no-store" || d == "no-cache":
			return 0
		case strings.HasPrefix(d, "max-age="):
			if n, err := strconv.ParseInt(strings.TrimPrefix(d, "max-age="), 10, 64); err == nil && n > 0 && n < 1<<31 {
				age = time.Duration(n) * time.Second
			}
		}
	}
	return age
}

// LastError is the last fetch's error, nil after a good one: for a
// backend's health or metrics.
func (r *RemoteJWKS) LastError() error { return r.state().lastErr }
