package approval

import (
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"
	"time"
)

// FuzzVerify feeds the verifier any string, starting from real approvals
// and their near misses. It must never panic, every refusal must name one
// of the checks, and nothing but the exact tokens the guard signed may
// verify: no mutation of a token, however small, is accepted.
func FuzzVerify(f *testing.F) {
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = byte(i)
	}
	clock := newClock()
	ks, err := NewKeySet([]Key{{ID: "k1", Private: ed25519.NewKeyFromSeed(seed)}}, KeySetOptions{Now: clock.Now})
	if err != nil {
		f.Fatal(err)
	}
	signer := NewSigner(ks, SignerOptions{})
	a := testApproval(f)
	withTurn, _, err := signer.Sign(a)
	if err != nil {
		f.Fatal(err)
	}
	a.Turn, a.TTL = nil, 5*time.Minute
	withoutTurn, _, err := signer.Sign(a)
	if err != nil {
		f.Fatal(err)
	}
	signed := map[string]bool{withTurn: true, withoutTurn: true}
	v, err := NewJWKSVerifier(ks.JWKS(), VerifierOptions{Now: clock.Now})
	if err != nil {
		f.Fatal(err)
	}

	parts := strings.Split(withTurn, ".")
	for _, s := range []string{
		withTurn, withoutTurn, "", ".", "..", "a.b.c",
		parts[0] + "." + parts[1] + ".",
		parts[0] + ".." + parts[2],
		strings.ToUpper(withTurn),
		withTurn[:len(withTurn)-1] + "B",
		parts[0] + "." + strings.Split(withoutTurn, ".")[1] + "." + parts[2],
		"eyJhbGciOiJub25lIn0.e30.",
	} {
		f.Add(s)
	}
	sentinels := []error{ErrMalformed, ErrAlgorithm, ErrSignature, ErrExpired, ErrIssuer, ErrKeysUnavailable}
	f.Fuzz(func(t *testing.T, token string) {
		c, err := v.Verify(token)
		if err == nil {
			if !signed[token] {
				t.Fatalf("a token the guard never signed verified: %q, claims %+v", token, c)
			}
			return
		}
		named := false
		for _, s := range sentinels {
			named = named || errors.Is(err, s)
		}
		if !named {
			t.Fatalf("Verify(%q): %v names none of the checks", token, err)
		}
		if errors.Is(err, ErrSignature) && c != nil {
			t.Fatalf("claims returned for a bad signature: %+v", c)
		}
	})
}
