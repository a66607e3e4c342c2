package approval

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// b64 is base64url without padding, as JWS writes every part.
func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// compact builds a compact JWS by hand, signed with priv (or an empty
// signature when priv is nil), so a test controls every header byte and
// still carries a valid signature.
func compact(t testing.TB, priv ed25519.PrivateKey, header string, payload []byte) string {
	t.Helper()
	input := b64([]byte(header)) + "." + b64(payload)
	if priv == nil {
		return input + "."
	}
	return input + "." + b64(ed25519.Sign(priv, []byte(input)))
}

func okHeader(kid string) string {
	return `{"alg":"EdDSA","kid":"` + kid + `","typ":"` + TokenType + `"}`
}

// payloadOf is the decoded payload of a token, as a map a test may edit.
func payloadOf(t testing.TB, token string) map[string]any {
	t.Helper()
	parts := strings.Split(token, ".")
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestApprovalVerifiesWithTheJWKS(t *testing.T) {
	f := newFixture(t)
	a := testApproval(t)
	token, signed := f.sign(t, a)

	v := f.jwksVerifier(t)
	got, err := v.VerifyFor(token, "submit_appeal", map[string]any{"amount": 120.5, "appeal_id": "A-17"})
	if err != nil {
		t.Fatalf("VerifyFor: %v", err)
	}
	if !reflect.DeepEqual(got, signed) {
		t.Errorf("verified claims differ from the signed ones:\n got %+v\nwant %+v", got, signed)
	}
	if got.KeyID != "k1" || got.DecisionID != a.DecisionID || got.CallID != "c1" || got.Tool != "submit_appeal" || got.ArgsHash != a.ArgsHash {
		t.Errorf("claims = %+v", got)
	}
	if life := got.ExpiresAt.Sub(got.IssuedAt); life != DefaultTTL {
		t.Errorf("lifetime %s, want the default %s", life, DefaultTTL)
	}
	if !got.IssuedAt.Equal(f.clock.Now()) {
		t.Errorf("iat %s, want %s", got.IssuedAt, f.clock.Now())
	}
	if *got.Turn != *a.Turn {
		t.Errorf("turn = %+v, want %+v", *got.Turn, *a.Turn)
	}

	// The wire form is the documented one.
	parts := strings.Split(token, ".")
	hdr, _ := base64.RawURLEncoding.DecodeString(parts[0])
	if string(hdr) != okHeader("k1") {
		t.Errorf("header %s, want %s", hdr, okHeader("k1"))
	}
	claims := payloadOf(t, token)
	var names []string
	for k := range claims {
		names = append(names, k)
	}
	slices.Sort(names)
	if want := []string{"args_sha256", "call_id", "exp", "iat", "iss", "jti", "tool", "turn"}; !slices.Equal(names, want) {
		t.Errorf("claims %v, want %v", names, want)
	}
	turn, _ := claims["turn"].(map[string]any)
	if turn["text_sha256"] != TextHash("Yes please.") || turn["start_ms"] != 41200.0 || turn["end_ms"] != 41950.0 || turn["received_ms"] != float64(a.Turn.ReceivedAt.UnixMilli()) {
		t.Errorf("turn claim = %v", turn)
	}

	// go-jose on its own reads and verifies it as a JWS.
	jws, err := jose.ParseSignedCompact(token, []jose.SignatureAlgorithm{jose.EdDSA})
	if err != nil {
		t.Fatalf("go-jose parse: %v", err)
	}
	if p, err := jws.Verify(f.keys.Keys()[0].Public); err != nil || string(p) != string(mustJSON(t, signed.wire())) {
		t.Errorf("go-jose verify: %s, %v", p, err)
	}
	if h := jws.Signatures[0].Protected; h.KeyID != "k1" || h.Algorithm != "EdDSA" || h.ExtraHeaders["typ"] != TokenType {
		t.Errorf("go-jose reads the header as %+v", h)
	}

	// The guard's own key set verifies it too (Redeem).
	if _, err := NewVerifier(f.keys, f.opts).Verify(token); err != nil {
		t.Errorf("Verify with the key set: %v", err)
	}
}

func TestApprovalWithoutTurn(t *testing.T) {
	f := newFixture(t)
	a := testApproval(t)
	a.Turn = nil
	a.TTL = 1500 * time.Millisecond
	token, signed := f.sign(t, a)
	got, err := f.jwksVerifier(t).Verify(token)
	if err != nil {
		t.Fatal(err)
	}
	if got.Turn != nil || signed.Turn != nil {
		t.Errorf("turn = %+v, want none", got.Turn)
	}
	if _, ok := payloadOf(t, token)["turn"]; ok {
		t.Error("payload has a turn claim")
	}
	if life := got.ExpiresAt.Sub(got.IssuedAt); life != 2*time.Second {
		t.Errorf("a 1.5s TTL gave %s, want it rounded up to 2s", life)
	}
}

func TestVerifyRefuses(t *testing.T) {
	f := newFixture(t)
	a := testApproval(t)
	token, _ := f.sign(t, a)
	parts := strings.Split(token, ".")
	k1 := f.keys.set.Load().byID["k1"].Private
	now := f.clock.Now().Unix()

	// An approval signed by another key set holding a key with the same id.
	forger, err := NewKeySet([]Key{newKey(t, "k1", time.Time{})}, KeySetOptions{Now: f.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	forged, _, err := NewSigner(forger, SignerOptions{}).Sign(a)
	if err != nil {
		t.Fatal(err)
	}
	stranger, _ := NewKeySet([]Key{newKey(t, "k9", time.Time{})}, KeySetOptions{Now: f.clock.Now})
	strange, _, _ := NewSigner(stranger, SignerOptions{}).Sign(a)

	withClaims := func(edit func(m map[string]any)) string {
		m := payloadOf(t, token)
		edit(m)
		return compact(t, k1, okHeader("k1"), mustJSON(t, m))
	}
	flip := func(s string, i int) string {
		b := []byte(s)
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
		return string(b)
	}
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	hs256 := func() string {
		input := b64([]byte(`{"alg":"HS256","kid":"k1","typ":"`+TokenType+`"}`)) + "." + parts[1]
		mac := hmac.New(sha256.New, k1.Public().(ed25519.PublicKey))
		mac.Write([]byte(input))
		return input + "." + b64(mac.Sum(nil))
	}()
	// The signature's last character differs in its unused low bits only:
	// lenient base64 decodes it to the same signature.
	sig := parts[2]
	last := strings.IndexByte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", sig[len(sig)-1])
	lowBits := parts[0] + "." + parts[1] + "." + sig[:len(sig)-1] + string("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"[last^1])

	cases := []struct {
		name  string
		token string
		want  error
	}{
		{"forged with another key under the same kid", forged, ErrSignature},
		{"signed by a key the guard never had", strange, ErrUnknownKey},
		{"payload tampered", parts[0] + "." + b64([]byte(strings.Replace(string(payload), `"c1"`, `"c2"`, 1))) + "." + parts[2], ErrSignature},
		{"payload tool changed", parts[0] + "." + b64([]byte(strings.Replace(string(payload), `"submit_appeal"`, `"pay_bill"`, 1))) + "." + parts[2], ErrSignature},
		{"header re-encoded", b64([]byte(`{"typ":"`+TokenType+`","alg":"EdDSA","kid":"k1"}`)) + "." + parts[1] + "." + parts[2], ErrSignature},
		{"signature tampered", parts[0] + "." + parts[1] + "." + flip(parts[2], 10), ErrSignature},
		{"signature of another token", parts[0] + "." + parts[1] + "." + strings.Split(forged, ".")[2], ErrSignature},
		{"signature with stray low bits", lowBits, ErrMalformed},
		{"signature cut", parts[0] + "." + parts[1] + "." + parts[2][:40], ErrSignature},
		{"alg none", compact(t, nil, `{"alg":"none","kid":"k1","typ":"`+TokenType+`"}`, payload), ErrAlgorithm},
		{"alg none signed", compact(t, k1, `{"alg":"none","kid":"k1","typ":"`+TokenType+`"}`, payload), ErrAlgorithm},
		{"alg HS256 keyed with the public key", hs256, ErrAlgorithm},
		{"alg ES256", compact(t, k1, `{"alg":"ES256","kid":"k1","typ":"`+TokenType+`"}`, payload), ErrAlgorithm},
		{"alg Ed25519 (not the JOSE name)", compact(t, k1, `{"alg":"Ed25519","kid":"k1","typ":"`+TokenType+`"}`, payload), ErrAlgorithm},
		{"no alg", compact(t, k1, `{"kid":"k1","typ":"`+TokenType+`"}`, payload), ErrAlgorithm},
		{"alg not a string", compact(t, k1, `{"alg":1,"kid":"k1","typ":"`+TokenType+`"}`, payload), ErrAlgorithm},
		{"crit header", compact(t, k1, `{"alg":"EdDSA","crit":["exp"],"exp":1,"kid":"k1","typ":"`+TokenType+`"}`, payload), ErrMalformed},
		{"crit b64", compact(t, k1, `{"alg":"EdDSA","b64":false,"crit":["b64"],"kid":"k1","typ":"`+TokenType+`"}`, payload), ErrMalformed},
		{"empty crit", compact(t, k1, `{"alg":"EdDSA","crit":[],"kid":"k1","typ":"`+TokenType+`"}`, payload), ErrMalformed},
		{"embedded jwk", compact(t, k1, `{"alg":"EdDSA","jwk":{"kty":"OKP","crv":"Ed25519","x":"`+b64(k1.Public().(ed25519.PublicKey))+`"},"kid":"k1","typ":"`+TokenType+`"}`, payload), ErrMalformed},
		{"jku", compact(t, k1, `{"alg":"EdDSA","jku":"http://127.0.0.1/jwks","kid":"k1","typ":"`+TokenType+`"}`, payload), ErrMalformed},
		{"typ JWT", compact(t, k1, `{"alg":"EdDSA","kid":"k1","typ":"JWT"}`, payload), ErrMalformed},
		{"no typ", compact(t, k1, `{"alg":"EdDSA","kid":"k1"}`, payload), ErrMalformed},
		{"no kid", compact(t, k1, `{"alg":"EdDSA","typ":"`+TokenType+`"}`, payload), ErrMalformed},
		{"kid twice", compact(t, k1, `{"alg":"EdDSA","kid":"k9","kid":"k1","typ":"`+TokenType+`"}`, payload), ErrMalformed},
		{"header not an object", compact(t, k1, `["EdDSA"]`, payload), ErrMalformed},
		{"header with trailing data", compact(t, k1, okHeader("k1")+`{}`, payload), ErrMalformed},
		{"no exp", withClaims(func(m map[string]any) { delete(m, "exp") }), ErrMalformed},
		{"exp before iat", withClaims(func(m map[string]any) { m["exp"] = now - 1 }), ErrMalformed},
		{"exp not a number", withClaims(func(m map[string]any) { m["exp"] = "soon" }), ErrMalformed},
		{"fractional exp", withClaims(func(m map[string]any) { m["exp"] = float64(now) + 30.5 }), ErrMalformed},
		{"valid too long", withClaims(func(m map[string]any) { m["exp"] = now + int64(DefaultMaxTTL/time.Second) + 1 }), ErrMalformed},
		{"issued in the future", withClaims(func(m map[string]any) {
			m["iat"] = now + 3600
			m["exp"] = now + 3660
		}), ErrMalformed},
		{"no jti", withClaims(func(m map[string]any) { delete(m, "jti") }), ErrMalformed},
		{"jti with a dot", withClaims(func(m map[string]any) { m["jti"] = "a.b" }), ErrMalformed},
		{"no tool", withClaims(func(m map[string]any) { m["tool"] = "" }), ErrMalformed},
		{"args hash in upper case", withClaims(func(m map[string]any) { m["args_sha256"] = strings.ToUpper(a.ArgsHash) }), ErrMalformed},
		{"claims not an object", compact(t, k1, okHeader("k1"), []byte(`[1]`)), ErrMalformed},
		{"another issuer", withClaims(func(m map[string]any) { m["iss"] = "someone-else" }), ErrIssuer},
		{"two parts", parts[0] + "." + parts[1], ErrMalformed},
		{"four parts", token + "." + parts[2], ErrMalformed},
		{"padding", token + "=", ErrMalformed},
		{"whitespace", token[:20] + "\n" + token[20:], ErrMalformed},
		{"JSON serialization", `{"payload":"` + parts[1] + `","protected":"` + parts[0] + `","signature":"` + parts[2] + `"}`, ErrMalformed},
		{"empty", "", ErrMalformed},
		{"too long", token + strings.Repeat("A", maxTokenBytes), ErrMalformed},
	}
	v := f.jwksVerifier(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := v.Verify(tc.token)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Verify = %v, %v; want %v", c, err, tc.want)
			}
			for _, other := range []error{ErrMalformed, ErrAlgorithm, ErrSignature, ErrExpired, ErrIssuer, ErrMismatch} {
				if other != tc.want && !errors.Is(tc.want, other) && errors.Is(err, other) {
					t.Errorf("error %v is also %v", err, other)
				}
			}
			if errors.Is(err, ErrSignature) && c != nil {
				t.Errorf("claims %+v returned for a token whose signature failed", c)
			}
		})
	}
}

func TestVerifyActionRefusesAnotherAction(t *testing.T) {
	f := newFixture(t)
	a := testApproval(t)
	token, _ := f.sign(t, a)
	v := f.jwksVerifier(t)

	cases := []struct {
		name string
		run  func() (*Claims, error)
		want error
	}{
		{"same action", func() (*Claims, error) { return v.VerifyFor(token, "submit_appeal", testArgs) }, nil},
		{"same action, call named", func() (*Claims, error) {
			return v.VerifyAction(token, Action{CallID: "c1", Tool: "submit_appeal", ArgsHash: a.ArgsHash})
		}, nil},
		{"tool not named", func() (*Claims, error) { return v.VerifyAction(token, Action{ArgsHash: a.ArgsHash}) }, nil},
		{"other arguments", func() (*Claims, error) {
			return v.VerifyFor(token, "submit_appeal", map[string]any{"appeal_id": "A-18", "amount": 120.5})
		}, ErrMismatch},
		{"one argument more", func() (*Claims, error) {
			return v.VerifyFor(token, "submit_appeal", map[string]any{"appeal_id": "A-17", "amount": 120.5, "note": ""})
		}, ErrMismatch},
		{"a number written otherwise is the same", func() (*Claims, error) {
			return v.VerifyFor(token, "submit_appeal", map[string]any{"appeal_id": "A-17", "amount": json.Number("1.205e2")})
		}, nil},
		{"another tool", func() (*Claims, error) { return v.VerifyFor(token, "pay_bill", testArgs) }, ErrMismatch},
		{"no tool given", func() (*Claims, error) { return v.VerifyFor(token, "", testArgs) }, ErrMismatch},
		{"another call", func() (*Claims, error) {
			return v.VerifyAction(token, Action{CallID: "c2", Tool: "submit_appeal", ArgsHash: a.ArgsHash})
		}, ErrMismatch},
		{"no arguments hash", func() (*Claims, error) { return v.VerifyAction(token, Action{Tool: "submit_appeal"}) }, ErrMismatch},
		{"arguments that cannot be hashed", func() (*Claims, error) {
			return v.VerifyFor(token, "submit_appeal", map[string]any{"f": func() {}})
		}, ErrMismatch},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tc.run()
			if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if tc.want == nil && c.DecisionID != a.DecisionID {
				t.Errorf("claims = %+v", c)
			}
		})
	}
}

func TestVerifyExpiry(t *testing.T) {
	f := newFixture(t)
	token, signed := f.sign(t, testApproval(t))
	v := f.jwksVerifier(t)

	f.clock.Advance(DefaultTTL + DefaultSkew - time.Second)
	if _, err := v.Verify(token); err != nil {
		t.Fatalf("within the skew after exp: %v", err)
	}
	f.clock.Advance(time.Second)
	c, err := v.Verify(token)
	if !errors.Is(err, ErrExpired) {
		t.Fatalf("at exp + skew: %v, want ErrExpired", err)
	}
	if c == nil || c.DecisionID != signed.DecisionID {
		t.Errorf("an expired token's claims = %+v, want them for the record", c)
	}

	// A verifier with (almost) no skew refuses right after exp.
	strict := NewVerifier(f.keys, VerifierOptions{Now: f.clock.Now, Skew: time.Nanosecond})
	token2, c2 := f.sign(t, testApproval(t))
	f.clock.Advance(c2.ExpiresAt.Sub(f.clock.Now()) - time.Nanosecond)
	if _, err := strict.Verify(token2); err != nil {
		t.Errorf("just before exp: %v", err)
	}
	f.clock.Advance(2 * time.Nanosecond)
	if _, err := strict.Verify(token2); !errors.Is(err, ErrExpired) {
		t.Errorf("at exp + 1ns with a 1ns skew: %v, want ErrExpired", err)
	}
}

func TestSignRefuses(t *testing.T) {
	f := newFixture(t)
	cases := []struct {
		name string
		edit func(a *Approval)
	}{
		{"ttl over the maximum", func(a *Approval) { a.TTL = DefaultMaxTTL + time.Second }},
		{"negative ttl", func(a *Approval) { a.TTL = -time.Second }},
		{"no decision id", func(a *Approval) { a.DecisionID = "" }},
		{"decision id with a dot", func(a *Approval) { a.DecisionID = "a.b" }},
		{"decision id with a wildcard", func(a *Approval) { a.DecisionID = "a*" }},
		{"no call", func(a *Approval) { a.CallID = "" }},
		{"no tool", func(a *Approval) { a.Tool = "" }},
		{"bad args hash", func(a *Approval) { a.ArgsHash = "abc" }},
		{"bad turn hash", func(a *Approval) { a.Turn.TextHash = "Yes please." }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := testApproval(t)
			tc.edit(&a)
			if token, _, err := f.signer.Sign(a); err == nil {
				t.Fatalf("Sign = %q, want an error", token)
			}
		})
	}

	// No key signs yet: every key starts later.
	later, err := NewKeySet([]Key{newKey(t, "k2", f.clock.Now().Add(time.Hour))}, KeySetOptions{Now: f.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := NewSigner(later, SignerOptions{}).Sign(testApproval(t)); err == nil {
		t.Error("a key set whose keys all start later signed")
	}

	// The maximum is the key set's.
	long, _ := NewKeySet([]Key{newKey(t, "k3", time.Time{})}, KeySetOptions{Now: f.clock.Now, MaxTTL: time.Hour})
	a := testApproval(t)
	a.TTL = 30 * time.Minute
	token, c, err := NewSigner(long, SignerOptions{Issuer: "guard-eu"}).Sign(a)
	if err != nil {
		t.Fatalf("a 30m TTL under a 1h maximum: %v", err)
	}
	if _, err := NewVerifier(long, VerifierOptions{Now: f.clock.Now}).Verify(token); !errors.Is(err, ErrIssuer) {
		t.Errorf("a verifier expecting the default issuer: %v, want ErrIssuer", err)
	}
	if _, err := NewVerifier(long, VerifierOptions{Now: f.clock.Now, Issuer: "guard-eu"}).Verify(token); !errors.Is(err, ErrMalformed) {
		t.Errorf("a verifier allowing 10m: %v, want ErrMalformed", err)
	}
	if got, err := NewVerifier(long, VerifierOptions{Now: f.clock.Now, Issuer: "guard-eu", MaxTTL: time.Hour}).Verify(token); err != nil || got.Issuer != "guard-eu" || got.ExpiresAt != c.ExpiresAt {
		t.Errorf("a verifier allowing 1h: %+v, %v", got, err)
	}
}

func TestRotationKeepsOldTokensUntilTheyExpire(t *testing.T) {
	clock := newClock()
	t0 := clock.Now()
	k1 := newKey(t, "k1", time.Time{})
	ks, err := NewKeySet([]Key{k1}, KeySetOptions{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	signer := NewSigner(ks, SignerOptions{})
	verifier := NewVerifier(ks, VerifierOptions{Now: clock.Now})
	old, oldClaims, err := signer.Sign(testApproval(t))
	if err != nil || oldClaims.KeyID != "k1" {
		t.Fatalf("Sign: %v, %+v", err, oldClaims)
	}

	// A replica reloads with a second key that signs from t0+10s: it is
	// published at once, and k1 signs until then.
	k2 := newKey(t, "k2", t0.Add(10*time.Second))
	if err := ks.SetKeys([]Key{k1, k2}); err != nil {
		t.Fatal(err)
	}
	if ids := jwksIDs(t, ks.JWKS()); !slices.Equal(ids, []string{"k1", "k2"}) {
		t.Errorf("JWKS before k2 signs: %v", ids)
	}
	if _, c, _ := signer.Sign(testApproval(t)); c.KeyID != "k1" {
		t.Errorf("before k2's signs-from the key is %q", c.KeyID)
	}
	states := func() map[string]KeyState {
		m := map[string]KeyState{}
		for _, k := range ks.Keys() {
			m[k.ID] = k.State
		}
		return m
	}
	if s := states(); s["k1"] != KeySigning || s["k2"] != KeyNext {
		t.Errorf("states before the rotation: %v", s)
	}

	clock.Advance(10 * time.Second)
	token2, c2, err := signer.Sign(testApproval(t))
	if err != nil || c2.KeyID != "k2" {
		t.Fatalf("after k2's signs-from: %v, key %q", err, c2.KeyID)
	}
	if s := states(); s["k1"] != KeyRetired || s["k2"] != KeySigning {
		t.Errorf("states after the rotation: %v", s)
	}
	// The old token still verifies, with the key set and with the JWKS.
	clock.Advance(DefaultTTL - 11*time.Second)
	for name, v := range map[string]*Verifier{"key set": verifier, "jwks": mustJWKSVerifier(t, ks.JWKS(), clock)} {
		if _, err := v.Verify(old); err != nil {
			t.Errorf("%s: the old token before its expiry: %v", name, err)
		}
		if _, err := v.Verify(token2); err != nil {
			t.Errorf("%s: the new token: %v", name, err)
		}
	}
	// Then it expires like any other.
	clock.Advance(time.Second + DefaultSkew)
	if _, err := verifier.Verify(old); !errors.Is(err, ErrExpired) {
		t.Errorf("the old token after its expiry: %v, want ErrExpired", err)
	}

	// k1 is kept until t0+10s + MaxTTL + skew, then dropped: its tokens
	// are refused for their key and it leaves the JWKS.
	drop := t0.Add(10*time.Second + DefaultMaxTTL + DefaultSkew)
	clock.Advance(drop.Sub(clock.Now()))
	if _, err := ks.VerificationKey("k1"); err != nil {
		t.Errorf("k1 at its drop time: %v", err)
	}
	clock.Advance(time.Second)
	if _, err := verifier.Verify(old); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("a token of a key retired past its grace: %v, want ErrUnknownKey", err)
	}
	if ids := jwksIDs(t, ks.JWKS()); !slices.Equal(ids, []string{"k2"}) {
		t.Errorf("JWKS after k1's grace: %v", ids)
	}
	if s := states(); s["k1"] != KeyDropped || s["k2"] != KeySigning {
		t.Errorf("states after the grace: %v", s)
	}
	if _, err := mustJWKSVerifier(t, ks.JWKS(), clock).Verify(old); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("a backend with the new JWKS: %v, want ErrUnknownKey", err)
	}
}

// A successor whose SignsFrom is already past when the set learns of it
// retires the old key at that moment, not at the SignsFrom: the old key's
// last tokens verify until they expire, a later reload does not extend
// it, and it is dropped after its grace from the reload.
func TestPastSignsFromHoldsTheOldKey(t *testing.T) {
	clock := newClock()
	k1 := newKey(t, "k1", time.Time{})
	ks, err := NewKeySet([]Key{k1}, KeySetOptions{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	verifier := NewVerifier(ks, VerifierOptions{Now: clock.Now})
	old, _, err := NewSigner(ks, SignerOptions{}).Sign(testApproval(t))
	if err != nil {
		t.Fatal(err)
	}
	reload := clock.Now()
	k2 := newKey(t, "k2", reload.Add(-time.Hour))
	if err := ks.SetKeys([]Key{k1, k2}); err != nil {
		t.Fatal(err)
	}
	held := func() KeyInfo {
		t.Helper()
		for _, k := range ks.Keys() {
			if k.ID == "k1" {
				return k
			}
		}
		t.Fatal("k1 is gone from the set")
		return KeyInfo{}
	}
	if k := held(); k.State != KeyRetired || !k.HeldLate || !k.RetiredAt.Equal(reload) || !k.DropAt.Equal(reload.Add(DefaultMaxTTL+DefaultSkew)) {
		t.Fatalf("k1 after a successor from an hour ago: %+v", k)
	}
	if ids := jwksIDs(t, ks.JWKS()); !slices.Equal(ids, []string{"k1", "k2"}) {
		t.Errorf("JWKS: %v, want k1 kept", ids)
	}
	clock.Advance(DefaultTTL - time.Second)
	if _, err := verifier.Verify(old); err != nil {
		t.Errorf("k1's last token before its expiry: %v", err)
	}
	// Another reload keeps the moment k1 stopped signing.
	if err := ks.SetKeys([]Key{k1, k2}); err != nil {
		t.Fatal(err)
	}
	if k := held(); !k.RetiredAt.Equal(reload) {
		t.Errorf("a second reload moved k1's retirement to %s, want %s", k.RetiredAt, reload)
	}
	clock.Advance(reload.Add(DefaultMaxTTL + DefaultSkew + time.Second).Sub(clock.Now()))
	if ids := jwksIDs(t, ks.JWKS()); !slices.Equal(ids, []string{"k2"}) {
		t.Errorf("JWKS after k1's grace from the reload: %v", ids)
	}
}

func mustJWKSVerifier(t testing.TB, jwks []byte, clock *testClock) *Verifier {
	t.Helper()
	v, err := NewJWKSVerifier(jwks, VerifierOptions{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func jwksIDs(t testing.TB, doc []byte) []string {
	t.Helper()
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(doc, &set); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, k := range set.Keys {
		ids = append(ids, k.KeyID)
	}
	slices.Sort(ids)
	return ids
}

func TestNewKeySetRefuses(t *testing.T) {
	t0 := newClock().Now()
	a, b := newKey(t, "a", time.Time{}), newKey(t, "b", t0)
	cases := []struct {
		name string
		keys []Key
	}{
		{"no keys", nil},
		{"one id for two keys", []Key{a, {ID: "a", Private: b.Private, SignsFrom: t0}}},
		{"one key with two signs-from times", []Key{a, {ID: "a", Private: a.Private, SignsFrom: t0}}},
		{"two keys signing from the same moment", []Key{b, {ID: "c", Private: a.Private, SignsFrom: t0}}},
		{"no id", []Key{{Private: a.Private}}},
		{"an id with a space", []Key{{ID: "a b", Private: a.Private}}},
		{"a short key", []Key{{ID: "a", Private: a.Private[:31]}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewKeySet(tc.keys, KeySetOptions{}); err == nil {
				t.Fatal("NewKeySet succeeded")
			}
		})
	}
	ks, err := NewKeySet([]Key{a, b, a}, KeySetOptions{})
	if err != nil {
		t.Fatalf("the same key twice: %v", err)
	}
	if n := len(ks.Keys()); n != 2 {
		t.Errorf("%d keys, want 2", n)
	}
	if err := ks.SetKeys(nil); err == nil {
		t.Error("SetKeys(nil) succeeded")
	}
	if n := len(ks.Keys()); n != 2 {
		t.Errorf("after a bad reload %d keys, want the 2 it had", n)
	}
}
