package approval

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
)

// TokenType is the JWS "typ" header of every approval (explicit typing,
// RFC 8725 section 3.11): a verifier refuses any other JWT, so no token
// issued for another purpose, even by the same key, passes as an approval.
const TokenType = "yesguard-approval+jwt"

// DefaultIssuer is the "iss" claim when the signer is given none.
const DefaultIssuer = "yesguard"

// DefaultTTL is an approval's lifetime when the policy sets none for the
// tool.
const DefaultTTL = 60 * time.Second

// Claims is what an approval says. A verified token's claims were written
// by the guard that allowed the action.
type Claims struct {
	// Issuer ("iss") names the guard deployment.
	Issuer string
	// DecisionID ("jti") is the ALLOW's decision id: the key the ledger
	// redeems once.
	DecisionID string
	// CallID ("call_id") and Tool ("tool") name the action's call and tool.
	CallID string
	Tool   string
	// ArgsHash ("args_sha256") is ArgsHash of the canonical arguments the
	// caller approved.
	ArgsHash string
	// Turn ("turn") is the caller turn the guard took as the yes; nil for
	// an ALLOW that rests on no turn (a tool the policy does not confirm).
	Turn *Turn
	// IssuedAt ("iat") and ExpiresAt ("exp"), whole seconds.
	IssuedAt  time.Time
	ExpiresAt time.Time
	// KeyID is the JWS "kid" header: the key that signed the token.
	KeyID string
}

// Turn identifies the caller turn used as evidence without carrying its
// words: the token may be logged by systems that must not hold the
// transcript.
type Turn struct {
	// TextHash ("text_sha256") is TextHash of the turn's text.
	TextHash string
	// StartMs and EndMs ("start_ms", "end_ms") are the turn's audio times,
	// ms since the call started; 0 where the events had none.
	StartMs int64
	EndMs   int64
	// ReceivedAt ("received_ms", Unix ms) is when the guard received the
	// turn's last event.
	ReceivedAt time.Time
}

// TextHash is the SHA-256 of a turn's text (its UTF-8 bytes as the guard
// holds them), in lowercase hex.
func TextHash(text string) string {
	sum := sha256.Sum256([]byte(text))
	return hex.EncodeToString(sum[:])
}

// wireClaims is the JWT payload. Field names are the contract with
// verifiers in other languages (docs/approvals.md).
type wireClaims struct {
	Issuer     string    `json:"iss"`
	DecisionID string    `json:"jti"`
	IssuedAt   int64     `json:"iat"`
	ExpiresAt  int64     `json:"exp"`
	CallID     string    `json:"call_id"`
	Tool       string    `json:"tool"`
	ArgsHash   string    `json:"args_sha256"`
	Turn       *wireTurn `json:"turn,omitempty"`
}

type wireTurn struct {
	TextHash   string `json:"text_sha256"`
	StartMs    int64  `json:"start_ms"`
	EndMs      int64  `json:"end_ms"`
	ReceivedMs int64  `json:"received_ms"`
}

func (c *Claims) wire() wireClaims {
	w := wireClaims{
		Issuer:     c.Issuer,
		DecisionID: c.DecisionID,
		IssuedAt:   c.IssuedAt.Unix(),
		ExpiresAt:  c.ExpiresAt.Unix(),
		CallID:     c.CallID,
		Tool:       c.Tool,
		ArgsHash:   c.ArgsHash,
	}
	if t := c.Turn; t != nil {
		w.Turn = &wireTurn{TextHash: t.TextHash, StartMs: t.StartMs, EndMs: t.EndMs, ReceivedMs: unixMilli(t.ReceivedAt)}
	}
	return w
}

// claims checks that every claim an approval must have is there and well
// formed, and returns them. The times are checked against a clock by the
// verifier, not here.
func (w *wireClaims) claims(kid string) (*Claims, error) {
	var errs []error
	need := func(name, v string) {
		if v == "" {
			errs = append(errs, fmt.Errorf("no %q claim", name))
		}
	}
	need("iss", w.Issuer)
	need("call_id", w.CallID)
	need("tool", w.Tool)
	if err := checkDecisionID(w.DecisionID); err != nil {
		errs = append(errs, fmt.Errorf("jti: %w", err))
	}
	if !isSHA256Hex(w.ArgsHash) {
		errs = append(errs, errors.New("args_sha256: not a lowercase hex SHA-256"))
	}
	switch {
	case w.IssuedAt <= 0:
		errs = append(errs, errors.New("no \"iat\" claim"))
	case w.IssuedAt > maxClaimTime:
		errs = append(errs, fmt.Errorf("iat: %d is past %d (the year 9999)", w.IssuedAt, maxClaimTime))
	}
	switch {
	case w.ExpiresAt <= 0:
		errs = append(errs, errors.New("no \"exp\" claim"))
	case w.ExpiresAt > maxClaimTime:
		errs = append(errs, fmt.Errorf("exp: %d is past %d (the year 9999)", w.ExpiresAt, maxClaimTime))
	case w.ExpiresAt <= w.IssuedAt:
		errs = append(errs, errors.New("exp is not after iat"))
	}
	c := &Claims{
		Issuer:     w.Issuer,
		DecisionID: w.DecisionID,
		CallID:     w.CallID,
		Tool:       w.Tool,
		ArgsHash:   w.ArgsHash,
		IssuedAt:   time.Unix(w.IssuedAt, 0).UTC(),
		ExpiresAt:  time.Unix(w.ExpiresAt, 0).UTC(),
		KeyID:      kid,
	}
	if t := w.Turn; t != nil {
		if !isSHA256Hex(t.TextHash) {
			errs = append(errs, errors.New("turn.text_sha256: not a lowercase hex SHA-256"))
		}
		if t.ReceivedMs < 0 || t.ReceivedMs > maxClaimTime*1000 {
			errs = append(errs, fmt.Errorf("turn.received_ms: %d is out of range", t.ReceivedMs))
		}
		c.Turn = &Turn{TextHash: t.TextHash, StartMs: t.StartMs, EndMs: t.EndMs, ReceivedAt: fromUnixMilli(t.ReceivedMs)}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return c, nil
}

// maxClaimTime bounds "iat" and "exp" (seconds since the epoch): the end
// of the year 9999, the last moment a record's timestamp (RFC 3339) can
// hold, so that the claims of any token can be recorded. Tighter bounds
// (MaxTTL, the skew) are the verifier's, against its clock.
const maxClaimTime = 253402300799

// maxIDBytes bounds a decision id (the guard's are 26-character ULIDs)
// and a key id.
const maxIDBytes = 128

// checkDecisionID holds a decision id to what can be a KV key token: the
// ledger keys on it, so nothing in it may change the key's meaning.
func checkDecisionID(id string) error { return checkID(id, "-_") }

// checkKeyID holds a key id to characters that need no escaping anywhere
// it is written (headers, logs, metric labels).
func checkKeyID(id string) error { return checkID(id, "-_.:") }

// checkID holds an id to 1 to maxIDBytes ASCII letters, digits and the
// bytes of extra.
func checkID(id, extra string) error {
	if id == "" {
		return errors.New("empty")
	}
	if len(id) > maxIDBytes {
		return fmt.Errorf("longer than %d bytes", maxIDBytes)
	}
	if !onlyChars(id, extra) {
		return fmt.Errorf("%q holds a character other than letters, digits and %q", id, extra)
	}
	return nil
}

// onlyChars reports whether s holds nothing but ASCII letters, digits and
// the bytes of extra.
func onlyChars(s, extra string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || strings.IndexByte(extra, c) >= 0) {
			return false
		}
	}
	return true
}

func isSHA256Hex(s string) bool {
	if len(s) != 2*sha256.Size {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// unixMilli and fromUnixMilli map the zero time to 0 and back.
func unixMilli(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromUnixMilli(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}
