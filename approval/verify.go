package approval

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// The checks a token can fail. Every error Verify returns wraps exactly
// one of them (errors.Is), with a detail saying what was wrong.
var (
	// ErrMalformed: not a compact JWS of an approval: bad encoding, a
	// header other than alg, kid and typ (a "crit" among them), another
	// typ, a missing or malformed claim (a token without "exp" is one), a
	// lifetime over the maximum, or issued in the future.
	ErrMalformed = errors.New("approval: malformed")
	// ErrAlgorithm: the "alg" header is not EdDSA ("none" and HS256
	// included).
	ErrAlgorithm = errors.New("approval: algorithm not accepted")
	// ErrSignature: the signature does not verify with the key its kid
	// names (forged or tampered with).
	ErrSignature = errors.New("approval: bad signature")
	// ErrUnknownKey: no key with that kid is held, or it was retired and
	// dropped. It wraps ErrSignature.
	ErrUnknownKey = fmt.Errorf("%w: unknown key", ErrSignature)
	// ErrKeysUnavailable: the verification keys could not be had (a JWKS
	// URL never fetched successfully). Refuse, and retry later.
	ErrKeysUnavailable = errors.New("approval: verification keys unavailable")
	// ErrIssuer: the "iss" claim is not the expected issuer.
	ErrIssuer = errors.New("approval: another issuer")
	// ErrExpired: the "exp" claim has passed, beyond the allowed skew.
	ErrExpired = errors.New("approval: expired")
	// ErrMismatch: the token is valid, but for another call, tool or
	// arguments than the ones about to be executed.
	ErrMismatch = errors.New("approval: does not match the action")
)

// maxTokenBytes bounds the work on one token; an approval is about 500
// bytes.
const maxTokenBytes = 8 << 10

// KeySource gives the public key a token's kid names. *KeySet (the guard's
// own keys), *JWKS (a fetched document) and *RemoteJWKS (a URL, cached)
// are key sources.
type KeySource interface {
	// VerificationKey returns the key, or an error wrapping ErrUnknownKey
	// (no such key, or dropped) or ErrKeysUnavailable.
	VerificationKey(kid string) (ed25519.PublicKey, error)
}

// VerifierOptions configures a Verifier. Zero fields take the defaults.
type VerifierOptions struct {
	// Issuer is the "iss" a token must carry; default DefaultIssuer.
	Issuer string
	// Skew is how far the verifier's clock may be from the guard's: a token
	// is accepted until exp + Skew. Default DefaultSkew.
	Skew time.Duration
	// MaxTTL refuses tokens whose exp - iat is longer. Default
	// DefaultMaxTTL; set it to the guard's when that is raised.
	MaxTTL time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Verifier checks approvals offline, with public keys only. It is safe
// for concurrent use.
type Verifier struct {
	keys KeySource
	opts VerifierOptions
}

// NewVerifier builds a verifier over a key source.
func NewVerifier(keys KeySource, opts VerifierOptions) *Verifier {
	if opts.Issuer == "" {
		opts.Issuer = DefaultIssuer
	}
	timingDefaults(&opts.MaxTTL, &opts.Skew, &opts.Now)
	return &Verifier{keys: keys, opts: opts}
}

// NewJWKSVerifier builds a verifier over a JWKS document (the guard's
// /.well-known/jwks.json, saved or shipped with the backend).
func NewJWKSVerifier(jwks []byte, opts VerifierOptions) (*Verifier, error) {
	set, err := ParseJWKS(jwks)
	if err != nil {
		return nil, err
	}
	return NewVerifier(set, opts), nil
}

// Verify checks a token: its form and header, its signature with the key
// its kid names, its claims, its issuer and its expiry. It returns the
// claims, or an error wrapping one of the sentinel errors. Once the
// signature has verified and the claims are well formed, they are
// returned with a later error too (ErrIssuer, ErrMalformed for a lifetime
// or issue time out of bounds, ErrExpired, and ErrMismatch from
// VerifyAction), for the record: never act on them when the error is not
// nil.
func (v *Verifier) Verify(token string) (*Claims, error) {
	h, payload, err := v.checkSignature(token)
	if err != nil {
		return nil, err
	}
	w, err := decodeClaims(payload)
	if err != nil {
		return nil, fmt.Errorf("%w: claims: %v", ErrMalformed, err)
	}
	c, err := w.claims(h.kid)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if c.Issuer != v.opts.Issuer {
		return c, fmt.Errorf("%w: issued by %q, want %q", ErrIssuer, c.Issuer, v.opts.Issuer)
	}
	if life := c.ExpiresAt.Sub(c.IssuedAt); life > v.opts.MaxTTL {
		return c, fmt.Errorf("%w: valid for %s, longer than the %s allowed", ErrMalformed, life, v.opts.MaxTTL)
	}
	now := v.opts.Now()
	if ahead := c.IssuedAt.Sub(now); ahead > v.opts.Skew {
		return c, fmt.Errorf("%w: issued %s in the future: the guard's clock and this one differ by more than %s", ErrMalformed, ahead, v.opts.Skew)
	}
	if !now.Before(c.ExpiresAt.Add(v.opts.Skew)) {
		return c, fmt.Errorf("%w: at %s", ErrExpired, c.ExpiresAt.Format(time.RFC3339))
	}
	return c, nil
}

// Action is what a backend is about to execute, to match against a token.
type Action struct {
	// CallID, when set, must equal the token's call id.
	CallID string
	// Tool, when set, must equal the token's tool.
	Tool string
	// ArgsHash is required: ArgsHash of the canonical arguments about to be
	// executed.
	ArgsHash string
}

// VerifyAction is Verify, then the token must be for this action: an
// error wrapping ErrMismatch names what differs.
func (v *Verifier) VerifyAction(token string, a Action) (*Claims, error) {
	c, err := v.Verify(token)
	if err != nil {
		return c, err
	}
	switch {
	case a.ArgsHash == "":
		return c, fmt.Errorf("%w: no arguments hash to compare", ErrMismatch)
	case a.CallID != "" && a.CallID != c.CallID:
		return c, fmt.Errorf("%w: approved for call %q, not %q", ErrMismatch, c.CallID, a.CallID)
	case a.Tool != "" && a.Tool != c.Tool:
		return c, fmt.Errorf("%w: approved for tool %q, not %q", ErrMismatch, c.Tool, a.Tool)
	case a.ArgsHash != c.ArgsHash:
		return c, fmt.Errorf("%w: the arguments differ from the approved ones (sha256 %s, approved %s)", ErrMismatch, a.ArgsHash, c.ArgsHash)
	}
	return c, nil
}

// VerifyFor is VerifyAction for a Go backend: the tool (required) and the
// arguments as it decoded them (see CanonicalMap).
func (v *Verifier) VerifyFor(token, tool string, args map[string]any) (*Claims, error) {
	if tool == "" {
		return nil, fmt.Errorf("%w: no tool to compare", ErrMismatch)
	}
	canon, err := CanonicalMap(args)
	if err != nil {
		return nil, fmt.Errorf("%w: arguments: %v", ErrMismatch, err)
	}
	return v.VerifyAction(token, Action{Tool: tool, ArgsHash: ArgsHash(canon)})
}

type tokenHeader struct {
	kid string
}

// checkSignature checks the token's form and header, then its signature,
// and returns the header and the signed payload.
//
// The form is held tighter than RFC 7515 asks, so that exactly one string
// carries a signed approval: only base64url characters and two dots, each
// part strict base64url (no padding, no newlines, no stray low bits).
// Without this "a.b.c" and a copy with the signature's last character
// changed would both verify.
func (v *Verifier) checkSignature(token string) (tokenHeader, []byte, error) {
	var h tokenHeader
	if len(token) > maxTokenBytes {
		return h, nil, fmt.Errorf("%w: longer than %d bytes", ErrMalformed, maxTokenBytes)
	}
	if !onlyChars(token, "-_.") {
		return h, nil, fmt.Errorf("%w: not a compact JWS (a character other than base64url and '.')", ErrMalformed)
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return h, nil, fmt.Errorf("%w: not a compact JWS (%d parts, want 3)", ErrMalformed, len(parts))
	}
	strict := base64.RawURLEncoding.Strict()
	for i, p := range parts {
		b, err := strict.DecodeString(p)
		if err != nil || len(b) == 0 {
			return h, nil, fmt.Errorf("%w: part %d is not base64url", ErrMalformed, i+1)
		}
		if i == 0 {
			// The header first: a token with "alg: none" and no
			// signature is refused for its algorithm.
			if h, err = parseHeader(b); err != nil {
				return h, nil, err
			}
		}
	}
	pub, err := v.keys.VerificationKey(h.kid)
	if err != nil {
		return h, nil, err
	}
	jws, err := jose.ParseSignedCompact(token, []jose.SignatureAlgorithm{jose.EdDSA})
	if err != nil {
		return h, nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	payload, err := jws.Verify(pub)
	if err != nil {
		return h, nil, fmt.Errorf("%w: key id %q", ErrSignature, h.kid)
	}
	return h, payload, nil
}

// parseHeader accepts exactly the header the guard writes: "alg" EdDSA,
// "typ" TokenType and a "kid", each once. A "crit" (RFC 7515 4.1.11) is
// refused whatever it lists, and so is any other parameter: "jwk", "jku",
// "x5u" and "x5c" would name a key the token brings itself.
func parseHeader(b []byte) (tokenHeader, error) {
	var h tokenHeader
	fields, err := jsonObject(b)
	if err != nil {
		return h, fmt.Errorf("%w: header: %v", ErrMalformed, err)
	}
	str := func(name string) (string, bool) {
		raw, ok := fields[name]
		if !ok {
			return "", false
		}
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return "", false
		}
		return s, true
	}
	alg, ok := str("alg")
	if !ok {
		return h, fmt.Errorf("%w: header has no \"alg\" string", ErrAlgorithm)
	}
	if alg != string(jose.EdDSA) {
		return h, fmt.Errorf("%w: %q, want EdDSA", ErrAlgorithm, alg)
	}
	if _, ok := fields["crit"]; ok {
		return h, fmt.Errorf("%w: header: critical parameters (\"crit\") are not accepted", ErrMalformed)
	}
	for name := range fields {
		if name != "alg" && name != "kid" && name != "typ" {
			return h, fmt.Errorf("%w: header: parameter %q is not accepted", ErrMalformed, name)
		}
	}
	if typ, _ := str("typ"); typ != TokenType {
		return h, fmt.Errorf("%w: header: typ %q, want %q", ErrMalformed, typ, TokenType)
	}
	kid, _ := str("kid")
	if kid == "" {
		return h, fmt.Errorf("%w: header: no \"kid\"", ErrMalformed)
	}
	h.kid = kid
	return h, nil
}

// jsonObject reads one JSON object's members, refusing a name twice (which
// JSON parsers resolve differently) and anything after the object.
func jsonObject(b []byte) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, errors.New("not a JSON object")
	}
	fields := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		name, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		if _, dup := fields[name]; dup {
			return nil, fmt.Errorf("%q twice", name)
		}
		fields[name] = raw
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the object")
	}
	return fields, nil
}

// Claim names, exactly as the guard writes them.
var (
	claimNames = []string{"iss", "jti", "iat", "exp", "call_id", "tool", "args_sha256", "turn"}
	turnNames  = []string{"text_sha256", "start_ms", "end_ms", "received_ms"}
)

// decodeClaims reads the payload so that it means one thing to every
// verifier: each member once (jsonObject; parsers disagree on which of
// two they keep), names compared case-sensitively, and a member whose
// name differs from a claim's only in case refused (encoding/json alone
// would take "JTI" for "jti"). Other members are ignored, as RFC 7519
// lets a verifier.
func decodeClaims(payload []byte) (*wireClaims, error) {
	fields, err := exactMembers(payload, claimNames)
	if err != nil {
		return nil, err
	}
	var w wireClaims
	for name, dst := range map[string]any{"iss": &w.Issuer, "jti": &w.DecisionID, "iat": &w.IssuedAt, "exp": &w.ExpiresAt,
		"call_id": &w.CallID, "tool": &w.Tool, "args_sha256": &w.ArgsHash} {
		if err := decodeMember(fields, name, dst); err != nil {
			return nil, err
		}
	}
	if raw, ok := fields["turn"]; ok && string(raw) != "null" {
		tf, err := exactMembers(raw, turnNames)
		if err != nil {
			return nil, fmt.Errorf("turn: %w", err)
		}
		w.Turn = &wireTurn{}
		for name, dst := range map[string]any{"text_sha256": &w.Turn.TextHash, "start_ms": &w.Turn.StartMs, "end_ms": &w.Turn.EndMs, "received_ms": &w.Turn.ReceivedMs} {
			if err := decodeMember(tf, name, dst); err != nil {
				return nil, fmt.Errorf("turn: %w", err)
			}
		}
	}
	return &w, nil
}

// exactMembers is jsonObject, refusing a member whose name equals one of
// names but for case.
func exactMembers(b []byte, names []string) (map[string]json.RawMessage, error) {
	fields, err := jsonObject(b)
	if err != nil {
		return nil, err
	}
	for name := range fields {
		for _, want := range names {
			if name != want && strings.EqualFold(name, want) {
				return nil, fmt.Errorf("%q: claim names are case-sensitive, the claim is %q", name, want)
			}
		}
	}
	return fields, nil
}

// decodeMember decodes fields[name], when present, into dst.
func decodeMember(fields map[string]json.RawMessage, name string, dst any) error {
	raw, ok := fields[name]
	if !ok {
		return nil
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}
