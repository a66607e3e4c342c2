package approval

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Redeemer is what redeems approvals exactly once: Ledger across the
// replicas sharing a JetStream KV bucket, MemoryLedger within one process.
// Redeem claims a verified approval's decision (nil: execute the action
// now) and returns its receipt, Release reopens it after the action
// failed (for the holder of that receipt only), Done closes it for good
// after the action succeeded. CheckRelease tells what a Release would
// answer, without writing. The errors are those of Ledger.
type Redeemer interface {
	Redeem(ctx context.Context, c *Claims) (receipt string, err error)
	Release(ctx context.Context, decisionID, receipt string) error
	CheckRelease(ctx context.Context, decisionID, receipt string) (Redemption, error)
	Done(ctx context.Context, decisionID string) error
	State(ctx context.Context, decisionID string) (LedgerState, error)
}

var (
	_ Redeemer = (*Ledger)(nil)
	_ Redeemer = (*MemoryLedger)(nil)
)

// memorySweepEvery bounds how often a MemoryLedger write sweeps the
// entries whose time is up.
const memorySweepEvery = time.Second

// MemoryLedger is Ledger within one process, for a guard whose state is
// in memory (one replica): the same rules and errors, exactly once among
// the goroutines of this process, nothing shared with another one and
// nothing kept across a restart. It is safe for concurrent use.
//
// Its size is bounded as Ledger's is: a redeemed entry leaves when its
// token can no longer be accepted anywhere (its expiry, the skew and a
// margin), a completed one after the longest a token lives (MaxTTL, twice
// the skew and the margin); writes sweep the entries whose time is up at
// most once a second.
type MemoryLedger struct {
	opts LedgerOptions

	mu        sync.Mutex             // guards the fields below
	entries   map[string]memoryEntry // by decision id, and yes key
	nextSweep time.Time
}

type memoryEntry struct {
	done  bool
	until time.Time // when the entry leaves
	// yes is, in a decision's entry, the key of the yes it claimed;
	// decision is, in a yes entry, the decision holding it.
	yes, decision string
	// receipt is the SHA-256 (hex) of a redeemed entry's receipt; call,
	// tool and args name the redeemed action.
	receipt, call, tool, args string
}

// ledgerEntry is the entry as Ledger would hold it, nil for none.
func (e memoryEntry) ledgerEntry(ok bool) *ledgerEntry {
	if !ok {
		return nil
	}
	v := &ledgerEntry{State: stateRedeemed, Yes: e.yes, Receipt: e.receipt, Call: e.call, Tool: e.tool, Args: e.args}
	if e.done {
		v.State = stateDone
	}
	return v
}

// NewMemoryLedger builds an empty ledger. Only Prefix, MaxTTL, Skew and
// Now of opts are used.
func NewMemoryLedger(opts LedgerOptions) *MemoryLedger {
	opts.setDefaults()
	return &MemoryLedger{opts: opts, entries: map[string]memoryEntry{}}
}

// YesKey is Ledger.YesKey.
func (l *MemoryLedger) YesKey(c *Claims) string { return yesKey(l.opts.Prefix, c) }

// live is the entry of id that has not left by now. l.mu must be held.
func (l *MemoryLedger) live(id string, now time.Time) (memoryEntry, bool) {
	e, ok := l.entries[id]
	if ok && !now.Before(e.until) {
		delete(l.entries, id)
		return memoryEntry{}, false
	}
	return e, ok
}

// sweep drops the entries whose time is up, at most every
// memorySweepEvery. l.mu must be held.
func (l *MemoryLedger) sweep(now time.Time) {
	if now.Before(l.nextSweep) {
		return
	}
	l.nextSweep = now.Add(memorySweepEvery)
	for id, e := range l.entries {
		if !now.Before(e.until) {
			delete(l.entries, id)
		}
	}
}

// Redeem is Ledger.Redeem.
func (l *MemoryLedger) Redeem(_ context.Context, c *Claims) (string, error) {
	if err := checkLedgerID(c.DecisionID); err != nil {
		return "", err
	}
	ttl, err := l.opts.redeemTTL(c)
	if err != nil {
		return "", err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.opts.Now()
	l.sweep(now)
	if _, ok := l.live(c.DecisionID, now); ok {
		return "", fmt.Errorf("%w: decision %s", ErrAlreadyRedeemed, c.DecisionID)
	}
	yes := l.YesKey(c)
	if y, ok := l.live(yes, now); ok && yes != "" && y.decision != c.DecisionID {
		return "", fmt.Errorf("%w (decision %s): decision %s", ErrYesRedeemed, y.decision, c.DecisionID)
	}
	receipt, hash := newReceipt()
	l.entries[c.DecisionID] = memoryEntry{until: now.Add(ttl), yes: yes, receipt: hash, call: c.CallID, tool: c.Tool, args: c.ArgsHash}
	if yes != "" {
		l.entries[yes] = memoryEntry{until: now.Add(l.opts.retain()), decision: c.DecisionID}
	}
	return receipt, nil
}

// CheckRelease is Ledger.CheckRelease.
func (l *MemoryLedger) CheckRelease(_ context.Context, decisionID, receipt string) (Redemption, error) {
	if err := checkLedgerID(decisionID); err != nil {
		return Redemption{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.live(decisionID, l.opts.Now())
	v := e.ledgerEntry(ok)
	return v.redemption(), v.mayRelease(decisionID, receipt)
}

// Release is Ledger.Release.
func (l *MemoryLedger) Release(_ context.Context, decisionID, receipt string) error {
	if err := checkLedgerID(decisionID); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.live(decisionID, l.opts.Now())
	if err := e.ledgerEntry(ok).mayRelease(decisionID, receipt); err != nil || !ok {
		return err
	}
	delete(l.entries, decisionID)
	if y, ok := l.entries[e.yes]; ok && e.yes != "" && y.decision == decisionID {
		delete(l.entries, e.yes)
	}
	return nil
}

// Done is Ledger.Done.
func (l *MemoryLedger) Done(_ context.Context, decisionID string) error {
	if err := checkLedgerID(decisionID); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.opts.Now()
	l.sweep(now)
	e, ok := l.live(decisionID, now)
	if ok && e.done {
		return nil
	}
	// The yes it claimed stays claimed, for the retention.
	l.entries[decisionID] = memoryEntry{done: true, until: now.Add(l.opts.retain()), yes: e.yes, call: e.call, tool: e.tool, args: e.args}
	return nil
}

// State is Ledger.State.
func (l *MemoryLedger) State(_ context.Context, decisionID string) (LedgerState, error) {
	if err := checkLedgerID(decisionID); err != nil {
		return "", err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.live(decisionID, l.opts.Now())
	switch {
	case !ok:
		return LedgerOpen, nil
	case e.done:
		return LedgerDone, nil
	}
	return LedgerRedeemed, nil
}

// Len is how many entries the ledger holds (swept or not), for tests and
// metrics.
func (l *MemoryLedger) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.entries)
}
