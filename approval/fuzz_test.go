package approval

import (
	"crypto/ed25519"
	"errors"
	"os"
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

// FuzzParseJWKS feeds the JWKS parser (a document fetched from a URL) any
// bytes: it must never panic, and what it accepts holds only Ed25519
// public keys under valid key ids.
func FuzzParseJWKS(f *testing.F) {
	ks, err := NewKeySet([]Key{newKey(f, "k1", time.Time{}), newKey(f, "k2", newClock().Now())}, KeySetOptions{})
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{
		string(ks.JWKS()), `{"keys":[]}`, `{}`, `[]`, `{"keys":[{"kty":"OKP","crv":"Ed25519","x":"","kid":"a"}]}`,
		`{"keys":[{"kty":"oct","k":"c2VjcmV0","kid":"s"}]}`,
		`{"keys":[{"kty":"EC","crv":"P-256","kid":"ec","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		set, err := ParseJWKS(doc)
		if err != nil {
			return
		}
		if len(set.keys) == 0 {
			t.Fatal("an accepted JWKS with no key")
		}
		for kid, pub := range set.keys {
			if checkKeyID(kid) != nil || len(pub) != ed25519.PublicKeySize {
				t.Fatalf("accepted key %q (%d bytes)", kid, len(pub))
			}
		}
	})
}

// FuzzParseKeyFile feeds the key file parser any bytes: it must never
// panic, and what it accepts is an Ed25519 key with a valid key id.
func FuzzParseKeyFile(f *testing.F) {
	dir := f.TempDir()
	k, err := GenerateKeyFile(dir, newClock().Now())
	if err != nil {
		f.Fatal(err)
	}
	data, err := os.ReadFile(k.Source)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add([]byte("-----BEGIN PRIVATE KEY-----\nKey-Id: x\n\nMC4CAQAwBQYDK2VwBCIEIA==\n-----END PRIVATE KEY-----\n"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, data []byte) {
		k, err := parseKeyFile(data)
		if err != nil {
			return
		}
		if len(k.Private) != ed25519.PrivateKeySize || checkKeyID(k.ID) != nil {
			t.Fatalf("accepted key %+v", k)
		}
	})
}
