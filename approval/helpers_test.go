package approval

import (
	"crypto/ed25519"
	"crypto/rand"
	"sync"
	"testing"
	"time"
)

// testClock is a clock the test moves by hand.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *testClock {
	return &testClock{t: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)}
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// newKey is a fresh key with id kid that signs from signsFrom.
func newKey(t testing.TB, kid string, signsFrom time.Time) Key {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return Key{ID: kid, Private: priv, SignsFrom: signsFrom}
}

// fixture is a key set with one key, its signer and a verifier over the
// set's JWKS, all on one test clock.
type fixture struct {
	clock  *testClock
	keys   *KeySet
	signer *Signer
	opts   VerifierOptions
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	clock := newClock()
	ks, err := NewKeySet([]Key{newKey(t, "k1", time.Time{})}, KeySetOptions{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{clock: clock, keys: ks, signer: NewSigner(ks, SignerOptions{}), opts: VerifierOptions{Now: clock.Now}}
}

// jwksVerifier verifies with the key set's JWKS as it is now, as a backend
// that fetched it would.
func (f *fixture) jwksVerifier(t testing.TB) *Verifier {
	t.Helper()
	v, err := NewJWKSVerifier(f.keys.JWKS(), f.opts)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

var testArgs = map[string]any{"appeal_id": "A-17", "amount": 120.5}

func testApproval(t testing.TB) Approval {
	t.Helper()
	canon, err := CanonicalMap(testArgs)
	if err != nil {
		t.Fatal(err)
	}
	return Approval{
		DecisionID: "01KB4Z3Q8K0V6YH1ZB2R9M7T4E",
		CallID:     "c1",
		Tool:       "submit_appeal",
		ArgsHash:   ArgsHash(canon),
		Turn: &Turn{
			TextHash:   TextHash("Yes please."),
			StartMs:    41200,
			EndMs:      41950,
			ReceivedAt: time.Date(2026, 12, 1, 9, 59, 59, 500_000_000, time.UTC),
		},
	}
}

func (f *fixture) sign(t testing.TB, a Approval) (string, *Claims) {
	t.Helper()
	token, c, err := f.signer.Sign(a)
	if err != nil {
		t.Fatalf("Sign: %v", err)
	}
	return token, c
}
