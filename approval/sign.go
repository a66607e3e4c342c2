package approval

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Approval is what the guard binds into the token of one ALLOW.
type Approval struct {
	DecisionID string
	CallID     string
	Tool       string
	// ArgsHash is ArgsHash(CanonicalArgs(args)).
	ArgsHash string
	// Turn is the caller turn taken as the yes; nil when none was.
	Turn *Turn
	// TTL is the token's lifetime: the tool's policy value, DefaultTTL
	// when zero, at most the key set's MaxTTL. It is rounded up to whole
	// seconds.
	TTL time.Duration
}

// SignerOptions configures a Signer.
type SignerOptions struct {
	// Issuer is the "iss" claim; default DefaultIssuer. Verifiers expect
	// the same value.
	Issuer string
}

// Signer issues approvals with the key set's signing key. It is safe for
// concurrent use.
type Signer struct {
	keys   *KeySet
	issuer string
}

// NewSigner builds a signer over keys.
func NewSigner(keys *KeySet, opts SignerOptions) *Signer {
	if opts.Issuer == "" {
		opts.Issuer = DefaultIssuer
	}
	return &Signer{keys: keys, issuer: opts.Issuer}
}

// Sign issues the approval of one ALLOW: a compact JWS (EdDSA) and the
// claims it carries (for the decision record: KeyID and ExpiresAt). It
// fails, and the guard must then not allow, when a field is missing or
// malformed, the TTL is out of bounds, or no key signs now.
func (s *Signer) Sign(a Approval) (string, *Claims, error) {
	ttl := a.TTL
	if ttl == 0 {
		ttl = DefaultTTL
	}
	if ttl < 0 || ttl > s.keys.opts.MaxTTL {
		return "", nil, fmt.Errorf("approval: ttl %s is outside (0, %s]", ttl, s.keys.opts.MaxTTL)
	}
	var errs []error
	if err := checkDecisionID(a.DecisionID); err != nil {
		errs = append(errs, fmt.Errorf("decision id: %w", err))
	}
	if a.CallID == "" {
		errs = append(errs, errors.New("no call id"))
	}
	if a.Tool == "" {
		errs = append(errs, errors.New("no tool"))
	}
	if !isSHA256Hex(a.ArgsHash) {
		errs = append(errs, errors.New("args hash: not a lowercase hex SHA-256"))
	}
	if a.Turn != nil && !isSHA256Hex(a.Turn.TextHash) {
		errs = append(errs, errors.New("turn text hash: not a lowercase hex SHA-256"))
	}
	if err := errors.Join(errs...); err != nil {
		return "", nil, fmt.Errorf("approval: %w", err)
	}
	now := s.keys.opts.Now()
	key, err := s.keys.signing(now)
	if err != nil {
		return "", nil, err
	}
	iat := time.Unix(now.Unix(), 0).UTC()
	c := &Claims{
		Issuer:     s.issuer,
		DecisionID: a.DecisionID,
		CallID:     a.CallID,
		Tool:       a.Tool,
		ArgsHash:   a.ArgsHash,
		IssuedAt:   iat,
		ExpiresAt:  iat.Add((ttl + time.Second - 1).Truncate(time.Second)),
		KeyID:      key.ID,
	}
	if a.Turn != nil {
		t := *a.Turn
		t.ReceivedAt = fromUnixMilli(unixMilli(t.ReceivedAt)) // what the token holds
		c.Turn = &t
	}
	payload, err := json.Marshal(c.wire())
	if err != nil {
		return "", nil, fmt.Errorf("approval: %w", err)
	}
	return compactJWS(key, payload), c, nil
}

// compactJWS is the JWS compact serialization (RFC 7515 section 7.1) of
// payload signed by key: BASE64URL(header) '.' BASE64URL(payload) '.'
// BASE64URL(Ed25519 signature of the first two parts). It is written
// here rather than by go-jose's signer to keep an ALLOW's cost to the
// signature itself (go-jose's generic signer makes some 60 allocations a
// token); the tests verify every token with go-jose.
func compactJWS(key *liveKey, payload []byte) string {
	enc := base64.RawURLEncoding
	b := make([]byte, 0, len(key.header)+2+enc.EncodedLen(len(payload))+enc.EncodedLen(ed25519.SignatureSize))
	b = append(b, key.header...)
	b = append(b, '.')
	b = enc.AppendEncode(b, payload)
	sig := ed25519.Sign(key.Private, b)
	b = append(b, '.')
	b = enc.AppendEncode(b, sig)
	return string(b)
}
