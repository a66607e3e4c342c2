package approval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// startJetStream runs an embedded NATS server with JetStream on the
// test's temporary directory.
func startJetStream(t testing.TB) *server.Server {
	t.Helper()
	ns, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true,
		JetStream: true, StoreDir: t.TempDir(),
	})
	if err != nil {
		t.Fatalf("nats server: %v", err)
	}
	ns.Start()
	t.Cleanup(func() {
		ns.Shutdown()
		ns.WaitForShutdown()
	})
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	return ns
}

// replica is one guard replica's own connection to the shared bucket.
type replica struct {
	js     jetstream.JetStream
	kv     jetstream.KeyValue
	ledger *Ledger
}

func connectReplica(t testing.TB, ns *server.Server, bucket, name string, opts LedgerOptions) *replica {
	t.Helper()
	nc, err := nats.Connect(ns.ClientURL(), nats.Name(name))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	kv, err := js.KeyValue(ctx, bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateKeyValue(ctx, LedgerBucketConfig(bucket, opts))
	}
	if err != nil {
		t.Fatalf("bucket: %v", err)
	}
	opts.Replica = name
	l, err := NewLedger(ctx, kv, opts)
	if err != nil {
		t.Fatalf("NewLedger: %v", err)
	}
	return &replica{js: js, kv: kv, ledger: l}
}

// raceRedeem redeems c on every replica at once and returns their
// errors and receipts.
func raceRedeem(ctx context.Context, c *Claims, replicas ...*replica) ([]error, []string) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make([]error, len(replicas))
	receipts := make([]string, len(replicas))
	for i, r := range replicas {
		wg.Go(func() {
			<-start
			receipts[i], errs[i] = r.ledger.Redeem(ctx, c)
		})
	}
	close(start)
	wg.Wait()
	return errs, receipts
}

// wantOneWinner fails the test unless exactly one of a race's redeems
// succeeded and every other was refused as already redeemed, and returns
// the winner's receipt.
func wantOneWinner(t *testing.T, race string, errs []error, receipts []string) string {
	t.Helper()
	won, receipt := 0, ""
	for i, err := range errs {
		switch {
		case err == nil:
			won++
			receipt = receipts[i]
		case !errors.Is(err, ErrAlreadyRedeemed):
			t.Fatalf("%s: %v", race, err)
		case receipts[i] != "":
			t.Fatalf("%s: a refused redeem returned a receipt", race)
		}
	}
	if won != 1 || receipt == "" {
		t.Fatalf("%s: %d redeems succeeded (%v), want exactly 1, with a receipt", race, won, errs)
	}
	return receipt
}

func ledgerClaims(id string, exp time.Time) *Claims {
	return &Claims{DecisionID: id, CallID: "c1", Tool: "submit_appeal", ExpiresAt: exp, IssuedAt: exp.Add(-DefaultTTL)}
}

func TestLedgerTwoReplicasRaceExactlyOneRedeems(t *testing.T) {
	ns := startJetStream(t)
	a := connectReplica(t, ns, "approvals", "replica-a", LedgerOptions{})
	b := connectReplica(t, ns, "approvals", "replica-b", LedgerOptions{})
	ctx := context.Background()
	exp := time.Now().Add(DefaultTTL)

	const rounds = 200
	for i := range rounds {
		c := ledgerClaims(fmt.Sprintf("D%04d", i), exp)
		errs, receipts := raceRedeem(ctx, c, a, b)
		wantOneWinner(t, fmt.Sprintf("round %d", i), errs, receipts)
		// Whoever lost, a third try on either replica is refused too.
		if _, err := b.ledger.Redeem(ctx, c); !errors.Is(err, ErrAlreadyRedeemed) {
			t.Fatalf("round %d: a later redeem: %v", i, err)
		}
	}
}

func TestLedgerRetryAfterReleaseRacesToOne(t *testing.T) {
	ns := startJetStream(t)
	a := connectReplica(t, ns, "approvals", "replica-a", LedgerOptions{})
	b := connectReplica(t, ns, "approvals", "replica-b", LedgerOptions{})
	ctx := context.Background()
	c := ledgerClaims("01KB4Z3Q8K0V6YH1ZB2R9M7T4E", time.Now().Add(DefaultTTL))
	receipt, err := a.ledger.Redeem(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		// The action failed: the redeemer's Complete(failed) on the other
		// replica.
		if err := b.ledger.Release(ctx, c.DecisionID, receipt); err != nil {
			t.Fatalf("round %d: Release: %v", i, err)
		}
		errs, receipts := raceRedeem(ctx, c, a, b)
		receipt = wantOneWinner(t, fmt.Sprintf("round %d after a release", i), errs, receipts)
	}
}

func TestLedgerLifecycle(t *testing.T) {
	ns := startJetStream(t)
	a := connectReplica(t, ns, "approvals", "replica-a", LedgerOptions{})
	b := connectReplica(t, ns, "approvals", "replica-b", LedgerOptions{})
	ctx := context.Background()
	now := time.Now()
	c := ledgerClaims("01KB4Z3Q8K0V6YH1ZB2R9M7T4E", now.Add(DefaultTTL))

	state := func(want LedgerState) {
		t.Helper()
		for _, r := range []*replica{a, b} {
			if got, err := r.ledger.State(ctx, c.DecisionID); err != nil || got != want {
				t.Fatalf("State = %q, %v; want %q", got, err, want)
			}
		}
	}
	state(LedgerOpen)
	if err := a.ledger.Release(ctx, c.DecisionID, ""); err != nil {
		t.Fatalf("Release of a decision never redeemed: %v", err)
	}
	receipt, err := a.ledger.Redeem(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	state(LedgerRedeemed)
	if _, err := b.ledger.Redeem(ctx, c); !errors.Is(err, ErrAlreadyRedeemed) {
		t.Fatalf("a second redeem on another replica: %v", err)
	}

	// The redeemed entry lives past the token's expiry, plus the skew,
	// and no longer than the ledger keeps anything.
	ttlOf := func(id string) time.Duration {
		t.Helper()
		st, err := a.js.Stream(ctx, "KV_approvals")
		if err != nil {
			t.Fatal(err)
		}
		m, err := st.GetLastMsgForSubject(ctx, "$KV.approvals."+a.ledger.Key(id))
		if err != nil {
			t.Fatal(err)
		}
		h := m.Header.Get(jetstream.MsgTTLHeader)
		if h == "" {
			return 0
		}
		d, err := time.ParseDuration(h)
		if err != nil {
			t.Fatalf("Nats-TTL %q: %v", h, err)
		}
		return d
	}
	if ttl, min := ttlOf(c.DecisionID), time.Until(c.ExpiresAt)+DefaultSkew; ttl < min || ttl > a.ledger.retain {
		t.Errorf("redeemed entry TTL %s, want between %s and %s", ttl, min, a.ledger.retain)
	}

	// Only the redeemer releases it: no receipt, a made-up one, or one
	// read from the bucket (it holds the receipt's hash) changes nothing.
	raw, err := a.kv.Get(ctx, a.ledger.Key(c.DecisionID))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw.Value()), receipt) {
		t.Fatalf("the entry holds the receipt itself: %s", raw.Value())
	}
	var stored ledgerEntry
	if err := json.Unmarshal(raw.Value(), &stored); err != nil || stored.Receipt == "" || stored.Call != c.CallID || stored.Tool != c.Tool {
		t.Fatalf("the redeemed entry %s: %v", raw.Value(), err)
	}
	for _, bad := range []string{"", "AAAAAAAAAAAAAAAAAAAAAA", stored.Receipt} {
		if err := b.ledger.Release(ctx, c.DecisionID, bad); !errors.Is(err, ErrNotRedeemer) {
			t.Fatalf("Release with receipt %q: %v, want ErrNotRedeemer", bad, err)
		}
		if r, err := b.ledger.CheckRelease(ctx, c.DecisionID, bad); !errors.Is(err, ErrNotRedeemer) || r.State != LedgerRedeemed || r.CallID != c.CallID || r.Tool != c.Tool {
			t.Fatalf("CheckRelease with receipt %q: %+v, %v", bad, r, err)
		}
		state(LedgerRedeemed)
	}
	if _, err := b.ledger.CheckRelease(ctx, c.DecisionID, receipt); err != nil {
		t.Fatalf("CheckRelease with the receipt: %v", err)
	}

	// The action failed: the redeemer's release (on the other replica)
	// lets a retry redeem, and leaves a marker that expires too.
	if err := b.ledger.Release(ctx, c.DecisionID, receipt); err != nil {
		t.Fatal(err)
	}
	state(LedgerOpen)
	if ttl := ttlOf(c.DecisionID); ttl != a.ledger.retain {
		t.Errorf("release marker TTL %s, want %s", ttl, a.ledger.retain)
	}
	retry, err := b.ledger.Redeem(ctx, c)
	if err != nil {
		t.Fatalf("the retry after a release: %v", err)
	}
	// The first redeem's receipt is spent: a late copy of its failure
	// cannot reopen the retry.
	if err := a.ledger.Release(ctx, c.DecisionID, receipt); !errors.Is(err, ErrNotRedeemer) || retry == receipt {
		t.Fatalf("Release with the first redeem's receipt after a retry: %v, want ErrNotRedeemer", err)
	}
	if _, err := a.ledger.Redeem(ctx, c); !errors.Is(err, ErrAlreadyRedeemed) {
		t.Fatalf("a second redeem of the retry: %v", err)
	}

	// The action succeeded: never again, and no release undoes it.
	if err := a.ledger.Done(ctx, c.DecisionID); err != nil {
		t.Fatal(err)
	}
	state(LedgerDone)
	if err := b.ledger.Done(ctx, c.DecisionID); err != nil {
		t.Errorf("Done twice: %v", err)
	}
	if err := b.ledger.Release(ctx, c.DecisionID, retry); !errors.Is(err, ErrCompleted) {
		t.Errorf("Release after Done: %v, want ErrCompleted", err)
	}
	for _, r := range []*replica{a, b} {
		if _, err := r.ledger.Redeem(ctx, c); !errors.Is(err, ErrAlreadyRedeemed) {
			t.Errorf("a redeem after Done: %v", err)
		}
	}

	// Done before any redeem closes the decision too.
	c2 := ledgerClaims("01KB4Z3Q8K0V6YH1ZB2R9M7T4F", now.Add(DefaultTTL))
	if err := a.ledger.Done(ctx, c2.DecisionID); err != nil {
		t.Fatal(err)
	}
	if ttl := ttlOf(c2.DecisionID); ttl != a.ledger.retain {
		t.Errorf("a completed entry created by Done has TTL %s, want %s", ttl, a.ledger.retain)
	}
	if _, err := b.ledger.Redeem(ctx, c2); !errors.Is(err, ErrAlreadyRedeemed) {
		t.Errorf("a redeem after Done without a redeem: %v", err)
	}

	// Refused before the KV is touched.
	if _, err := a.ledger.Redeem(ctx, ledgerClaims("D-late", now.Add(-DefaultSkew))); !errors.Is(err, ErrExpired) {
		t.Errorf("an expired approval: %v, want ErrExpired", err)
	}
	if _, err := a.ledger.Redeem(ctx, ledgerClaims("D-far", now.Add(time.Hour))); !errors.Is(err, ErrMalformed) {
		t.Errorf("an approval living past the ledger's retention: %v, want ErrMalformed", err)
	}
	for _, id := range []string{"", "a.b", "a*", "a>", "a b"} {
		if _, err := a.ledger.Redeem(ctx, ledgerClaims(id, now.Add(DefaultTTL))); err == nil {
			t.Errorf("decision id %q redeemed", id)
		}
		if err := a.ledger.Done(ctx, id); err == nil {
			t.Errorf("decision id %q done", id)
		}
	}

	// An entry the ledger did not write is not touched.
	if _, err := a.kv.Put(ctx, a.ledger.Key("D-foreign"), []byte("something")); err != nil {
		t.Fatal(err)
	}
	if err := a.ledger.Release(ctx, "D-foreign", ""); !errors.Is(err, ErrLedgerUnavailable) {
		t.Errorf("Release of a foreign entry: %v", err)
	}
}

func TestLedgerSuccessIsFinalWhateverTheOrder(t *testing.T) {
	ns := startJetStream(t)
	a := connectReplica(t, ns, "approvals", "replica-a", LedgerOptions{})
	b := connectReplica(t, ns, "approvals", "replica-b", LedgerOptions{})
	ctx := context.Background()
	exp := time.Now().Add(DefaultTTL)
	for i := range 50 {
		c := ledgerClaims(fmt.Sprintf("F%04d", i), exp)
		receipt, err := a.ledger.Redeem(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		// A failed and a successful Complete for one decision, racing on
		// two replicas: the success stands.
		var wg sync.WaitGroup
		start := make(chan struct{})
		var relErr, doneErr error
		wg.Go(func() { <-start; relErr = a.ledger.Release(ctx, c.DecisionID, receipt) })
		wg.Go(func() { <-start; doneErr = b.ledger.Done(ctx, c.DecisionID) })
		close(start)
		wg.Wait()
		if doneErr != nil || (relErr != nil && !errors.Is(relErr, ErrCompleted)) {
			t.Fatalf("round %d: Done %v, Release %v", i, doneErr, relErr)
		}
		if st, err := b.ledger.State(ctx, c.DecisionID); err != nil || st != LedgerDone {
			t.Fatalf("round %d: state %q, %v; want done", i, st, err)
		}
		if _, err := a.ledger.Redeem(ctx, c); !errors.Is(err, ErrAlreadyRedeemed) {
			t.Fatalf("round %d: a redeem after the race: %v", i, err)
		}
	}
}

func TestNewLedgerChecksTheBucket(t *testing.T) {
	ns := startJetStream(t)
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	retain := LedgerBucketConfig("x", LedgerOptions{}).TTL
	for _, tc := range []struct {
		name string
		cfg  jetstream.KeyValueConfig
		ok   bool
	}{
		{"no per-key TTLs", jetstream.KeyValueConfig{Bucket: "nottl", TTL: time.Hour}, false},
		{"no max age", jetstream.KeyValueConfig{Bucket: "noage", LimitMarkerTTL: time.Minute}, false},
		{"a max age too short", jetstream.KeyValueConfig{Bucket: "short", TTL: retain - time.Second, LimitMarkerTTL: time.Minute}, false},
		{"a shared bucket that fits", jetstream.KeyValueConfig{Bucket: "shared", TTL: time.Hour, LimitMarkerTTL: time.Second}, true},
		{"its own", LedgerBucketConfig("own", LedgerOptions{}), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kv, err := js.CreateKeyValue(ctx, tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := NewLedger(ctx, kv, LedgerOptions{}); (err == nil) != tc.ok {
				t.Errorf("NewLedger: %v, want ok %v", err, tc.ok)
			}
		})
	}
	kv, _ := js.KeyValue(ctx, "own")
	for _, p := range []string{"nodot", ".x.", "a b.", "a*."} {
		if _, err := NewLedger(ctx, kv, LedgerOptions{Prefix: p}); err == nil {
			t.Errorf("prefix %q accepted", p)
		}
	}
}
