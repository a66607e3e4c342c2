package approval

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// JWKSPath is where the guard's HTTP address serves JWKSHandler.
const JWKSPath = "/.well-known/jwks.json"

// JWKSContentType is the media type of a JWK set (RFC 7517 section 8.5).
const JWKSContentType = "application/jwk-set+json"

// DefaultJWKSMaxAge is how long verifiers may cache the JWKS. A new key
// must be published at least this long (plus the verifiers' refresh
// bound) before it starts signing; verifiers also refetch on an unknown
// kid, so a late one costs a fetch, not a refusal.
const DefaultJWKSMaxAge = 5 * time.Minute

// JWKS is the public keys of a JWK set document, by key id. It is a
// KeySource.
type JWKS struct {
	keys map[string]ed25519.PublicKey
}

// maxJWKSBytes bounds a JWKS document.
const maxJWKSBytes = 1 << 20

// ParseJWKS reads a JWK set. It keeps the Ed25519 signing keys (kty OKP,
// crv Ed25519, alg EdDSA or none, use sig or none), each with a kid; it
// fails on a private key, a kid twice, no usable key, or a document that
// is not a JWK set.
func ParseJWKS(doc []byte) (*JWKS, error) {
	if len(doc) > maxJWKSBytes {
		return nil, fmt.Errorf("jwks: larger than %d bytes", maxJWKSBytes)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(doc, &set); err != nil {
		return nil, fmt.Errorf("jwks: %w", err)
	}
	out := &JWKS{keys: map[string]ed25519.PublicKey{}}
	for i, k := range set.Keys {
		if !k.IsPublic() {
			return nil, fmt.Errorf("jwks: key %d (%q) is a private key: a JWKS must hold public keys only", i, k.KeyID)
		}
		pub, ok := k.Key.(ed25519.PublicKey)
		if !ok || (k.Algorithm != "" && k.Algorithm != string(jose.EdDSA)) || (k.Use != "" && k.Use != "sig") {
			continue // another service's key
		}
		if checkKeyID(k.KeyID) != nil {
			continue
		}
		if _, dup := out.keys[k.KeyID]; dup {
			return nil, fmt.Errorf("jwks: key id %q twice", k.KeyID)
		}
		out.keys[k.KeyID] = pub
	}
	if len(out.keys) == 0 {
		return nil, errors.New("jwks: no Ed25519 signing key with a key id")
	}
	return out, nil
}

// VerificationKey is the key for kid, or ErrUnknownKey.
func (j *JWKS) VerificationKey(kid string) (ed25519.PublicKey, error) {
	if pub, ok := j.keys[kid]; ok {
		return pub, nil
	}
	return nil, fmt.Errorf("%w: key id %q is not in the JWKS", ErrUnknownKey, kid)
}

// JWKS is the set's public keys as a JWK set document, at this moment:
// the signing key, the next ones and the retired ones not yet dropped,
// each with kid, alg EdDSA and use sig. It holds no private key.
func (s *KeySet) JWKS() []byte {
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{}}
	for _, k := range s.Keys() {
		if k.State == KeyDropped {
			continue
		}
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: k.Public, KeyID: k.ID, Algorithm: string(jose.EdDSA), Use: "sig"})
	}
	b, err := json.Marshal(set)
	if err != nil {
		// Marshalling Ed25519 public keys cannot fail; a set that did would
		// publish nothing rather than something wrong.
		return []byte(`{"keys":[]}`)
	}
	return b
}

// JWKSHandler serves the key set's public keys (mount it at JWKSPath) for
// GET and HEAD, with Cache-Control max-age (DefaultJWKSMaxAge when maxAge
// is 0) and an ETag, answering If-None-Match with 304.
func JWKSHandler(keys *KeySet, maxAge time.Duration) http.Handler {
	if maxAge <= 0 {
		maxAge = DefaultJWKSMaxAge
	}
	cacheControl := "public, max-age=" + strconv.Itoa(int(maxAge/time.Second))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed: GET the JWKS", http.StatusMethodNotAllowed)
			return
		}
		body := keys.JWKS()
		sum := sha256.Sum256(body)
		etag := `"` + base64.RawURLEncoding.EncodeToString(sum[:16]) + `"`
		h := w.Header()
		h.Set("Cache-Control", cacheControl)
		h.Set("ETag", etag)
		if etagMatch(r.Header.Get("If-None-Match"), etag) {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		h.Set("Content-Type", JWKSContentType)
		h.Set("Content-Length", strconv.Itoa(len(body)))
		if r.Method == http.MethodHead {
			return
		}
		_, _ = w.Write(body)
	})
}

// etagMatch reports whether an If-None-Match header names etag (weak
// comparison, RFC 9110 section 13.1.2).
func etagMatch(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || strings.TrimPrefix(t, "W/") == etag {
			return true
		}
	}
	return false
}
