package approval

import (
	"cmp"
	"crypto"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// Defaults of KeySetOptions.
const (
	// DefaultMaxTTL is the longest approval lifetime a key set signs: a
	// retired key is kept this long (plus the skew) after its successor
	// starts signing, so every token it signed expires before it goes.
	DefaultMaxTTL = 10 * time.Minute
	// DefaultSkew is the clock difference allowed between the guard's
	// replicas and the verifiers.
	DefaultSkew = 10 * time.Second
)

// Key is one Ed25519 signing key.
type Key struct {
	// ID is the JWS "kid": from the key file's Key-Id header, else the
	// key's RFC 7638 thumbprint (Thumbprint).
	ID string
	// Private is the key. Its public half is what the JWKS publishes.
	Private ed25519.PrivateKey
	// SignsFrom is when the key starts signing; zero means from the start.
	// The key set signs with the key whose SignsFrom is the latest one
	// that has passed, and retires the one before at that moment.
	SignsFrom time.Time
	// Source names where the key came from (a file), for messages.
	Source string
}

// KeySetOptions configures a KeySet. Zero fields take the defaults.
type KeySetOptions struct {
	// MaxTTL bounds every approval's lifetime (the signer refuses longer
	// ones) and so how long a retired key must stay. Default DefaultMaxTTL.
	MaxTTL time.Duration
	// Skew is the clock difference allowed between replicas and
	// verifiers. Default DefaultSkew.
	Skew time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
}

func (o *KeySetOptions) setDefaults() { timingDefaults(&o.MaxTTL, &o.Skew, &o.Now) }

// timingDefaults fills in the limits every part shares: the longest token
// life, the clock skew allowed, and the clock.
func timingDefaults(maxTTL, skew *time.Duration, now *func() time.Time) {
	if *maxTTL <= 0 {
		*maxTTL = DefaultMaxTTL
	}
	if *skew <= 0 {
		*skew = DefaultSkew
	}
	if *now == nil {
		*now = time.Now
	}
}

// KeySet holds the guard's approval keys: the one that signs now, the
// ones that start signing later (published ahead, so that verifiers with a
// cached JWKS know them before their first token), and the retired ones,
// which still verify until every token they signed has expired. A key
// retired at T (its successor's SignsFrom) is dropped at T + MaxTTL +
// Skew: from then on it is not published and its tokens are refused
// (ErrUnknownKey). Which keys are live is worked out from the clock on
// every use, so every replica holding the same keys agrees without talking
// to the others.
//
// A key's successor may be given with a SignsFrom already past (added
// late, or moved back). The key signed until the set learned of that
// successor, so it is retired then instead, not at the SignsFrom: it is
// dropped only once the tokens it signed until that moment have expired,
// and KeyInfo.HeldLate says so, for a warning. On a first load, which
// cannot know what other replicas signed a moment ago, only the key just
// before the signing one is held so.
//
// A KeySet is safe for concurrent use. SetKeys swaps the whole set at once;
// a call under way uses the set it started with.
type KeySet struct {
	opts KeySetOptions
	set  atomic.Pointer[keySnapshot]
}

// keySnapshot is one immutable set of keys, sorted by SignsFrom.
type keySnapshot struct {
	keys []*liveKey
	byID map[string]*liveKey
}

type liveKey struct {
	Key
	public ed25519.PublicKey
	// header is the token's first part for this key, base64url: the JWS
	// protected header {"alg":"EdDSA","kid":...,"typ":TokenType}.
	header string
	// retiredAt is when it stopped signing: its successor's SignsFrom,
	// or later when the set learned of that successor after it (heldLate);
	// zero for the last key.
	retiredAt time.Time
	heldLate  bool
}

// NewKeySet builds a key set. It fails on no keys, a key that is not a
// valid Ed25519 key, one key id for two different keys, and two keys that
// start signing at the same moment (which one signs would be a guess).
// The same key given twice (the same file mounted and in the data
// directory) counts once.
func NewKeySet(keys []Key, opts KeySetOptions) (*KeySet, error) {
	opts.setDefaults()
	s := &KeySet{opts: opts}
	if err := s.SetKeys(keys); err != nil {
		return nil, err
	}
	return s, nil
}

// SetKeys replaces the keys (a reload). On an error the old keys stay.
func (s *KeySet) SetKeys(keys []Key) error {
	snap, err := newSnapshot(keys, s.set.Load(), s.opts.Now())
	if err != nil {
		return err
	}
	s.set.Store(snap)
	return nil
}

// newSnapshot builds the set of keys as loaded at now, over prev (the set
// it replaces; nil on a first load).
func newSnapshot(keys []Key, prev *keySnapshot, now time.Time) (*keySnapshot, error) {
	if len(keys) == 0 {
		return nil, errors.New("approval keys: none")
	}
	snap := &keySnapshot{byID: make(map[string]*liveKey, len(keys))}
	var errs []error
	for _, k := range keys {
		if len(k.Private) != ed25519.PrivateKeySize {
			errs = append(errs, fmt.Errorf("approval key %s: not an Ed25519 private key", k.describe()))
			continue
		}
		if err := checkKeyID(k.ID); err != nil {
			errs = append(errs, fmt.Errorf("approval key %s: key id: %w", k.describe(), err))
			continue
		}
		pub := k.Private.Public().(ed25519.PublicKey)
		if old, ok := snap.byID[k.ID]; ok {
			if !old.public.Equal(pub) {
				errs = append(errs, fmt.Errorf("approval keys %s and %s: two keys with the key id %q", old.describe(), k.describe(), k.ID))
			} else if !old.SignsFrom.Equal(k.SignsFrom) {
				errs = append(errs, fmt.Errorf("approval keys %s and %s: one key with two signs-from times", old.describe(), k.describe()))
			}
			continue
		}
		// The key id needs no JSON escaping (checkKeyID).
		header := `{"alg":"EdDSA","kid":"` + k.ID + `","typ":"` + TokenType + `"}`
		lk := &liveKey{Key: k, public: pub, header: base64.RawURLEncoding.EncodeToString([]byte(header))}
		snap.byID[k.ID] = lk
		snap.keys = append(snap.keys, lk)
	}
	slices.SortFunc(snap.keys, func(a, b *liveKey) int { return a.SignsFrom.Compare(b.SignsFrom) })
	for i := 1; i < len(snap.keys); i++ {
		prev, k := snap.keys[i-1], snap.keys[i]
		if prev.SignsFrom.Equal(k.SignsFrom) {
			errs = append(errs, fmt.Errorf("approval keys %s and %s both start signing at %s: give one a later Signs-From", prev.describe(), k.describe(), describeTime(k.SignsFrom)))
		}
		prev.retiredAt = k.SignsFrom
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	snap.holdLateRetired(prev, now)
	return snap, nil
}

// holdLateRetired moves the retirement of each key whose successor's
// SignsFrom was already past when this set learned of it to the moment
// it really stopped signing: what the previous set says (it had retired
// it already), else now. On a first load (prev nil) only the key just
// before the one signing now is held: older ones were retired by keys
// that themselves signed before it.
func (snap *keySnapshot) holdLateRetired(prev *keySnapshot, now time.Time) {
	for i, k := range snap.keys {
		if k.retiredAt.IsZero() || !k.retiredAt.Before(now) {
			continue
		}
		stopped := now
		if prev == nil {
			if i+1 >= len(snap.keys) || (i+2 < len(snap.keys) && !snap.keys[i+2].SignsFrom.After(now)) {
				continue
			}
		} else if old, ok := prev.byID[k.ID]; ok && old.public.Equal(k.public) && !old.retiredAt.IsZero() && !old.retiredAt.After(now) {
			stopped = old.retiredAt
		}
		if stopped.After(k.retiredAt) {
			k.retiredAt, k.heldLate = stopped, true
		}
	}
}

func (k *Key) describe() string {
	if k.Source != "" {
		return k.Source
	}
	return fmt.Sprintf("%q", k.ID)
}

func describeTime(t time.Time) string {
	if t.IsZero() {
		return "the start"
	}
	return t.UTC().Format(time.RFC3339)
}

// Thumbprint is the RFC 7638 JWK thumbprint of an Ed25519 public key
// (SHA-256, base64url without padding): the key id of a key file that
// names none, the same on every replica that holds the key.
func Thumbprint(pub ed25519.PublicKey) (string, error) {
	tp, err := (&jose.JSONWebKey{Key: pub}).Thumbprint(crypto.SHA256)
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(tp), nil
}

// dropAt is when a retired key stops verifying: its successor started
// signing at retiredAt, so the last token it signed expires by retiredAt +
// MaxTTL, as read by any clock within Skew.
func (s *KeySet) dropAt(k *liveKey) time.Time {
	return k.retiredAt.Add(s.opts.MaxTTL + s.opts.Skew)
}

func (s *KeySet) dropped(k *liveKey, now time.Time) bool {
	return !k.retiredAt.IsZero() && now.After(s.dropAt(k))
}

// signing is the key that signs at now: the latest one whose SignsFrom has
// passed.
func (s *KeySet) signing(now time.Time) (*liveKey, error) {
	snap := s.set.Load()
	for i := len(snap.keys) - 1; i >= 0; i-- {
		if k := snap.keys[i]; !k.SignsFrom.After(now) {
			return k, nil
		}
	}
	return nil, fmt.Errorf("approval keys: none signs before %s", describeTime(snap.keys[0].SignsFrom))
}

// VerificationKey is the public key for kid, or ErrUnknownKey for a key
// the set never held or has dropped. It makes the KeySet a KeySource, for
// the guard's own Redeem.
func (s *KeySet) VerificationKey(kid string) (ed25519.PublicKey, error) {
	k, ok := s.set.Load().byID[kid]
	if !ok {
		return nil, fmt.Errorf("%w: key id %q", ErrUnknownKey, kid)
	}
	if now := s.opts.Now(); s.dropped(k, now) {
		return nil, fmt.Errorf("%w: key id %q was retired at %s and dropped at %s", ErrUnknownKey, kid, describeTime(k.retiredAt), describeTime(s.dropAt(k)))
	}
	return k.public, nil
}

// KeyState is one key's place in its lifecycle at a moment.
type KeyState string

// Key states.
const (
	// KeyNext: published, signs from its SignsFrom on.
	KeyNext KeyState = "next"
	// KeySigning: the key that signs now.
	KeySigning KeyState = "signing"
	// KeyRetired: signs no more, still verifies until DropAt.
	KeyRetired KeyState = "retired"
	// KeyDropped: neither published nor accepted.
	KeyDropped KeyState = "dropped"
)

// KeyInfo describes one key of the set, for logs and the operator.
type KeyInfo struct {
	ID        string
	Source    string
	State     KeyState
	SignsFrom time.Time
	// RetiredAt and DropAt are zero while no later key exists.
	RetiredAt time.Time
	DropAt    time.Time
	// HeldLate: its successor's SignsFrom was past when the set learned of
	// it, so the key is retired at RetiredAt, later than that SignsFrom,
	// and kept until the tokens it signed until then expire (warn: give a
	// new key a SignsFrom ahead).
	HeldLate bool
	Public   ed25519.PublicKey
}

// Keys describes every key of the set at this moment, the one that signs
// first, then the next ones, then the retired and dropped ones, newest
// first.
func (s *KeySet) Keys() []KeyInfo {
	now := s.opts.Now()
	snap := s.set.Load()
	cur, _ := s.signing(now)
	out := make([]KeyInfo, 0, len(snap.keys))
	for _, k := range snap.keys {
		ki := KeyInfo{ID: k.ID, Source: k.Source, SignsFrom: k.SignsFrom, RetiredAt: k.retiredAt, HeldLate: k.heldLate, Public: k.public}
		if !k.retiredAt.IsZero() {
			ki.DropAt = s.dropAt(k)
		}
		switch {
		case k == cur:
			ki.State = KeySigning
		case k.SignsFrom.After(now):
			ki.State = KeyNext
		case s.dropped(k, now):
			ki.State = KeyDropped
		default:
			ki.State = KeyRetired
		}
		out = append(out, ki)
	}
	rank := map[KeyState]int{KeySigning: 0, KeyNext: 1, KeyRetired: 2, KeyDropped: 3}
	slices.SortStableFunc(out, func(a, b KeyInfo) int {
		if c := cmp.Compare(rank[a.State], rank[b.State]); c != 0 {
			return c
		}
		return b.SignsFrom.Compare(a.SignsFrom)
	})
	return out
}
