package approval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Ledger errors.
var (
	// ErrAlreadyRedeemed: the decision was redeemed before (on any
	// replica) and not released, or its action completed.
	ErrAlreadyRedeemed = errors.New("approval: already redeemed")
	// ErrYesRedeemed: another approval resting on the same caller yes (the
	// same call, tool and turn: a failure let the guard allow the action
	// again) is redeemed, or its action completed. It wraps
	// ErrAlreadyRedeemed.
	ErrYesRedeemed = fmt.Errorf("%w: the caller's yes was redeemed with another approval", ErrAlreadyRedeemed)
	// ErrCompleted: Release after Done; a completed action is never
	// released.
	ErrCompleted = errors.New("approval: already completed")
	// ErrNotRedeemer: Release of a redeemed decision without the receipt
	// of the Redeem that holds it (none, or an earlier redeem's). Only the
	// redeemer reopens what it redeemed; the entry is unchanged.
	ErrNotRedeemer = errors.New("approval: redeemed, and only its redeemer (with the Redeem's receipt) may release it")
	// ErrLedgerUnavailable: the KV could not be read or written. Nothing
	// was redeemed: refuse, and let the backend retry.
	ErrLedgerUnavailable = errors.New("approval: ledger unavailable")
)

// DefaultLedgerPrefix is the prefix of the ledger's keys: a decision's
// entry is "approval.<decision id>".
const DefaultLedgerPrefix = "approval."

// ledgerMargin is how long an entry outlives its token beyond the skew.
const ledgerMargin = 30 * time.Second

// casAttempts bounds the read-and-compare-and-set rounds of Release and
// Done; each lost round means another writer changed the entry.
const casAttempts = 8

// LedgerOptions configures a Ledger. Zero fields take the defaults.
type LedgerOptions struct {
	// Prefix of the ledger's keys in the bucket; default
	// DefaultLedgerPrefix. It must be a valid KV key prefix ending in ".".
	Prefix string
	// MaxTTL is the longest approval lifetime (the key set's MaxTTL) and
	// Skew the clock difference allowed (the key set's): entries are kept
	// until every token they name has expired. Defaults DefaultMaxTTL and
	// DefaultSkew.
	MaxTTL time.Duration
	Skew   time.Duration
	// Replica names this replica in the entries it writes.
	Replica string
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Ledger makes the redeem of an approval exactly once across every
// replica sharing a JetStream KV bucket. A decision's entry moves only by
// atomic operations on the KV's per-key revisions, never by reading and
// then writing blind:
//
//   - Redeem claims it with Create: of any number of redeems racing on any
//     replicas exactly one creates the entry; the others are
//     ErrAlreadyRedeemed.
//   - Release (the action failed) removes a redeemed entry with a purge
//     conditional on the revision it read, so a retry can redeem again.
//     Only the redeemer may: Redeem returns a receipt (a random secret,
//     of which the entry keeps the SHA-256), and Release of a redeemed
//     entry without that receipt is ErrNotRedeemer. Whoever merely holds
//     the approval (the pipeline that asked for it) cannot reopen it.
//   - Done (the action succeeded) turns a redeemed entry into a completed
//     one with an update conditional on its revision (or creates it
//     completed), after which no Redeem succeeds and Release is
//     ErrCompleted.
//
// One caller yes executes its action once, too, whatever approvals it
// was given in: after a failure released its action the guard may allow
// it again on the same yes, under a new decision and a new approval. So a
// Redeem of an approval resting on a caller turn also claims the turn
// (call, tool and the turn's hash and times), with Create, for the
// retention; a second approval of that yes is ErrYesRedeemed until
// Release of the first frees it. Completing never frees it.
//
// A read that comes from a follower and is stale makes the conditional
// write fail and the round start again; a stale read can only make
// Release a no-op or Redeem refuse, never let a second redeem through.
//
// Entries are bounded: a redeemed entry and a release marker carry a TTL
// past their token's expiry; a completed one lives for the bucket's max
// age, which NewLedger requires to cover a token's life.
type Ledger struct {
	kv     jetstream.KeyValue
	opts   LedgerOptions
	retain time.Duration
}

// ledgerEntry is the value of a decision's key, and of a yes key.
type ledgerEntry struct {
	State     string `json:"state"` // "redeemed" or "done"
	Replica   string `json:"replica,omitempty"`
	At        int64  `json:"at_ms"`
	ExpiresAt int64  `json:"exp,omitempty"` // the token's, for a redeemed entry
	// Yes is, in a decision's entry, the key of the yes it claimed; in a
	// yes key, Decision is the decision that holds it.
	Yes      string `json:"yes,omitempty"`
	Decision string `json:"decision,omitempty"`
	// Receipt is, in a redeemed entry, the SHA-256 (hex) of the receipt
	// its Redeem returned; Call, Tool and Args name the action, for the
	// records of releases it refuses.
	Receipt string `json:"receipt_sha256,omitempty"`
	Call    string `json:"call,omitempty"`
	Tool    string `json:"tool,omitempty"`
	Args    string `json:"args_sha256,omitempty"`
}

const (
	stateRedeemed = "redeemed"
	stateDone     = "done"
)

// LedgerBucketConfig is a bucket of its own for the ledger: per-key TTLs
// on, and a max age covering any token's life.
func LedgerBucketConfig(name string, opts LedgerOptions) jetstream.KeyValueConfig {
	opts.setDefaults()
	return jetstream.KeyValueConfig{
		Bucket:         name,
		Description:    "yesguard approvals: the exactly-once redeem ledger",
		History:        1,
		TTL:            opts.retain(),
		LimitMarkerTTL: time.Minute,
	}
}

func (o *LedgerOptions) setDefaults() {
	if o.Prefix == "" {
		o.Prefix = DefaultLedgerPrefix
	}
	timingDefaults(&o.MaxTTL, &o.Skew, &o.Now)
}

// redeemTTL is how long a redeemed entry for c must stay, whole seconds
// (the server's TTLs are): past every verifier's acceptance of the token.
// An expired token is ErrExpired; one living longer than MaxTTL allows is
// ErrMalformed (only a verifier allowing longer tokens lets one through,
// and the bucket's max age could drop its entry early).
func (o *LedgerOptions) redeemTTL(c *Claims) (time.Duration, error) {
	ttl := c.ExpiresAt.Add(o.Skew + ledgerMargin).Sub(o.Now())
	if ttl <= ledgerMargin {
		return 0, fmt.Errorf("%w: at %s", ErrExpired, c.ExpiresAt.Format(time.RFC3339))
	}
	if ttl > o.retain() {
		return 0, fmt.Errorf("%w: expires %s, later than this ledger's MaxTTL allows", ErrMalformed, c.ExpiresAt.Format(time.RFC3339))
	}
	return (ttl + time.Second - 1).Truncate(time.Second), nil
}

// retain is how long any entry must stay: past the expiry of the longest
// token a verifier accepts when it is written (issued up to Skew ahead of
// this clock, valid MaxTTL, accepted Skew past its expiry).
func (o *LedgerOptions) retain() time.Duration { return o.MaxTTL + 2*o.Skew + ledgerMargin }

// NewLedger builds a ledger over kv, which may be shared with other state
// (the keys are prefixed). The bucket must allow per-key TTLs
// (LimitMarkerTTL set) and have a max age (TTL) of at least
// MaxTTL + 2 Skew + 30s, so that no entry leaves before its token expires
// and completed entries do not pile up: LedgerBucketConfig is such a
// bucket.
func NewLedger(ctx context.Context, kv jetstream.KeyValue, opts LedgerOptions) (*Ledger, error) {
	opts.setDefaults()
	l := &Ledger{kv: kv, opts: opts, retain: opts.retain()}
	if !jetstreamKeyPrefixValid(opts.Prefix) {
		return nil, fmt.Errorf("approval ledger: prefix %q: letters, digits, '-', '_', '=', '/' and '.' only, ending in '.'", opts.Prefix)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("approval ledger: bucket status: %w", err)
	}
	if st.LimitMarkerTTL() <= 0 {
		return nil, fmt.Errorf("approval ledger: bucket %q has no per-key TTLs: create it with LimitMarkerTTL set (see LedgerBucketConfig)", st.Bucket())
	}
	if age := st.TTL(); age < l.retain {
		what := "no max age, so completed approvals would stay forever"
		if age > 0 {
			what = fmt.Sprintf("a max age of %s, so an entry could leave before its approval expires", age)
		}
		return nil, fmt.Errorf("approval ledger: bucket %q has %s: give it a TTL of at least %s (see LedgerBucketConfig)", st.Bucket(), what, l.retain)
	}
	return l, nil
}

func jetstreamKeyPrefixValid(p string) bool {
	return p != "" && p[0] != '.' && p[len(p)-1] == '.' && !strings.Contains(p, "..") && onlyChars(p, "-_=/.")
}

// Key is the KV key of a decision's entry.
func (l *Ledger) Key(decisionID string) string { return l.opts.Prefix + decisionID }

func (l *Ledger) key(decisionID string) (string, error) {
	if err := checkLedgerID(decisionID); err != nil {
		return "", err
	}
	return l.Key(decisionID), nil
}

// checkLedgerID refuses a decision id no ledger entry may have.
func checkLedgerID(decisionID string) error {
	if err := checkDecisionID(decisionID); err != nil {
		return fmt.Errorf("approval ledger: decision id: %w", err)
	}
	return nil
}

func (l *Ledger) value(e ledgerEntry) []byte {
	e.Replica, e.At = l.opts.Replica, l.opts.Now().UnixMilli()
	b, _ := json.Marshal(e) // a struct of strings and ints cannot fail
	return b
}

// YesKey is the key an approval's caller yes is claimed under ("" for an
// approval resting on no turn): the call, the tool and the turn, hashed.
// A decision id is never "yes", so it cannot collide with a decision's key.
func (l *Ledger) YesKey(c *Claims) string { return yesKey(l.opts.Prefix, c) }

func yesKey(prefix string, c *Claims) string {
	t := c.Turn
	if t == nil {
		return ""
	}
	id := fmt.Sprintf("%s\x00%s\x00%s\x00%d\x00%d\x00%d", c.CallID, c.Tool, t.TextHash, t.StartMs, t.EndMs, unixMilli(t.ReceivedAt))
	return prefix + "yes." + TextHash(id)[:32]
}

// Redeem claims the approval's decision, once: a nil error means this
// caller may execute the action, and the receipt it returns is what
// releases the decision again (Release) should the action fail; keep it
// secret. c must come from a verification that succeeded.
// Errors: ErrExpired (the token's life is over), ErrAlreadyRedeemed,
// ErrLedgerUnavailable.
func (l *Ledger) Redeem(ctx context.Context, c *Claims) (string, error) {
	key, err := l.key(c.DecisionID)
	if err != nil {
		return "", err
	}
	ttl, err := l.opts.redeemTTL(c)
	if err != nil {
		return "", err
	}
	receipt, receiptHash := newReceipt()
	yes := l.YesKey(c)
	v := ledgerEntry{State: stateRedeemed, ExpiresAt: c.ExpiresAt.Unix(), Yes: yes, Receipt: receiptHash, Call: c.CallID, Tool: c.Tool, Args: c.ArgsHash}
	rev, err := l.kv.Create(ctx, key, l.value(v), jetstream.KeyTTL(ttl))
	switch {
	case err == nil:
	case isConflict(err):
		return "", fmt.Errorf("%w: decision %s", ErrAlreadyRedeemed, c.DecisionID)
	default:
		return "", fmt.Errorf("%w: redeem %s: %w", ErrLedgerUnavailable, c.DecisionID, err)
	}
	if yes == "" {
		return receipt, nil
	}
	err = l.claimYes(ctx, yes, c.DecisionID)
	if err == nil {
		return receipt, nil
	}
	// The yes is another approval's (or could not be claimed): give the
	// decision back, so that a later redeem of it may try again.
	if perr := l.kv.Purge(ctx, key, jetstream.LastRevision(rev), jetstream.PurgeTTL(l.retain)); perr != nil && !isConflict(perr) {
		err = errors.Join(err, fmt.Errorf("%w: give back %s: %w", ErrLedgerUnavailable, c.DecisionID, perr))
	}
	return "", err
}

// claimYes claims the yes key for decisionID: a Create, kept for the
// retention (past any token of that yes), or, when the key already names
// decisionID (a release that freed the decision but not its yes), that
// claim. Another decision's claim is ErrYesRedeemed.
func (l *Ledger) claimYes(ctx context.Context, yes, decisionID string) error {
	_, err := l.kv.Create(ctx, yes, l.value(ledgerEntry{State: stateRedeemed, Decision: decisionID}), jetstream.KeyTTL(l.retain))
	if err == nil {
		return nil
	}
	if !isConflict(err) {
		return fmt.Errorf("%w: redeem %s: its yes: %w", ErrLedgerUnavailable, decisionID, err)
	}
	_, v, rerr := l.read(ctx, yes)
	switch {
	case rerr != nil:
		return rerr
	case v != nil && v.Decision == decisionID:
		return nil
	}
	holder := "an approval"
	if v != nil {
		holder = "decision " + v.Decision
	}
	return fmt.Errorf("%w (%s): decision %s", ErrYesRedeemed, holder, decisionID)
}

// isConflict is a compare-and-set that lost: the key exists, or its
// revision moved. Create reports a lost race either way (it retries on a
// delete marker with the revision it read).
func isConflict(err error) bool {
	if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return true
	}
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// read is the decision's entry: nil when there is none (never redeemed, or
// released).
func (l *Ledger) read(ctx context.Context, key string) (jetstream.KeyValueEntry, *ledgerEntry, error) {
	e, err := l.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%w: read %s: %w", ErrLedgerUnavailable, key, err)
	}
	var v ledgerEntry
	if err := json.Unmarshal(e.Value(), &v); err != nil || (v.State != stateRedeemed && v.State != stateDone) {
		// Not written by a ledger: refuse to touch it.
		return nil, nil, fmt.Errorf("%w: %s holds %q, not a ledger entry", ErrLedgerUnavailable, key, e.Value())
	}
	return e, &v, nil
}

// Release lets the decision be redeemed again (its action failed), for
// the redeemer only: receipt must be the one its Redeem returned. It is
// a no-op for a decision not redeemed, ErrNotRedeemer for a redeemed one
// without its receipt, and ErrCompleted after Done.
func (l *Ledger) Release(ctx context.Context, decisionID, receipt string) error {
	key, err := l.key(decisionID)
	if err != nil {
		return err
	}
	for range casAttempts {
		e, v, err := l.read(ctx, key)
		if err != nil {
			return err
		}
		if err := v.mayRelease(decisionID, receipt); err != nil || v == nil {
			return err
		}
		err = l.kv.Purge(ctx, key, jetstream.LastRevision(e.Revision()), jetstream.PurgeTTL(l.retain))
		if err == nil {
			l.freeYes(ctx, v.Yes, decisionID)
			return nil
		}
		if !isConflict(err) {
			return fmt.Errorf("%w: release %s: %w", ErrLedgerUnavailable, decisionID, err)
		}
	}
	return fmt.Errorf("%w: release %s: the entry kept changing", ErrLedgerUnavailable, decisionID)
}

// freeYes lets another approval of the yes be redeemed, when decisionID
// still holds it. It is best effort: a yes left claimed refuses the other
// approvals of that yes (fail closed) until the retention ends, and this
// decision's own retry takes its claim back (claimYes).
func (l *Ledger) freeYes(ctx context.Context, yes, decisionID string) {
	if yes == "" {
		return
	}
	e, v, err := l.read(ctx, yes)
	if err != nil || v == nil || v.Decision != decisionID {
		return
	}
	_ = l.kv.Purge(ctx, yes, jetstream.LastRevision(e.Revision()), jetstream.PurgeTTL(l.retain))
}

// Done records that the decision's action completed: it is never redeemed
// again, even if it was never redeemed before. Done twice is a no-op.
func (l *Ledger) Done(ctx context.Context, decisionID string) error {
	key, err := l.key(decisionID)
	if err != nil {
		return err
	}
	for range casAttempts {
		e, v, err := l.read(ctx, key)
		if err != nil {
			return err
		}
		switch {
		case v == nil:
			_, err = l.kv.Create(ctx, key, l.value(ledgerEntry{State: stateDone}), jetstream.KeyTTL(l.retain))
		case v.State == stateDone:
			return nil
		default:
			// Update drops the per-key TTL: the bucket's max age bounds the
			// completed entry (NewLedger checked it covers the token). The
			// yes it claimed stays claimed, for the retention.
			_, err = l.kv.Update(ctx, key, l.value(ledgerEntry{State: stateDone, Yes: v.Yes, Call: v.Call, Tool: v.Tool, Args: v.Args}), e.Revision())
		}
		if err == nil {
			return nil
		}
		if !isConflict(err) {
			return fmt.Errorf("%w: done %s: %w", ErrLedgerUnavailable, decisionID, err)
		}
	}
	return fmt.Errorf("%w: done %s: the entry kept changing", ErrLedgerUnavailable, decisionID)
}

// LedgerState is where a decision stands in the ledger.
type LedgerState string

// Ledger states.
const (
	LedgerOpen     LedgerState = "open" // never redeemed, or released
	LedgerRedeemed LedgerState = "redeemed"
	LedgerDone     LedgerState = "done"
)

// State reads where a decision stands, for messages and records (a read
// may lag a write made on another replica a moment ago). Decisions are
// made by Redeem, Release and Done, never on a State.
func (l *Ledger) State(ctx context.Context, decisionID string) (LedgerState, error) {
	key, err := l.key(decisionID)
	if err != nil {
		return "", err
	}
	_, v, err := l.read(ctx, key)
	switch {
	case err != nil:
		return "", err
	case v == nil:
		return LedgerOpen, nil
	case v.State == stateDone:
		return LedgerDone, nil
	default:
		return LedgerRedeemed, nil
	}
}

// Redemption is where a decision stands for a Release with a receipt
// (CheckRelease), and the action its entry names.
type Redemption struct {
	State LedgerState
	// CallID, Tool and ArgsHash are the redeemed approval's, when the
	// entry is redeemed or done after a redeem.
	CallID, Tool, ArgsHash string
}

// CheckRelease tells, without writing, what Release(decisionID, receipt)
// would answer now: nil, ErrNotRedeemer or ErrCompleted, with where the
// decision stands. It lets a caller refuse a release before it changes
// anything else; the decision is still Release's, which checks again
// atomically.
func (l *Ledger) CheckRelease(ctx context.Context, decisionID, receipt string) (Redemption, error) {
	key, err := l.key(decisionID)
	if err != nil {
		return Redemption{}, err
	}
	_, v, err := l.read(ctx, key)
	if err != nil {
		return Redemption{}, err
	}
	return v.redemption(), v.mayRelease(decisionID, receipt)
}

func (v *ledgerEntry) redemption() Redemption {
	switch {
	case v == nil:
		return Redemption{State: LedgerOpen}
	case v.State == stateDone:
		return Redemption{State: LedgerDone, CallID: v.Call, Tool: v.Tool, ArgsHash: v.Args}
	}
	return Redemption{State: LedgerRedeemed, CallID: v.Call, Tool: v.Tool, ArgsHash: v.Args}
}

// mayRelease is whether receipt may release the entry v (nil: none).
func (v *ledgerEntry) mayRelease(decisionID, receipt string) error {
	switch {
	case v == nil:
		return nil
	case v.State == stateDone:
		return fmt.Errorf("%w: decision %s", ErrCompleted, decisionID)
	case !receiptMatches(receipt, v.Receipt):
		return fmt.Errorf("%w: decision %s", ErrNotRedeemer, decisionID)
	}
	return nil
}
