package approval_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/http/httptest"
	"os"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/yesguard/yesguard/approval"
)

// A backend (here the appeals service) receives a request to submit an
// appeal, with the approval the guard gave the pipeline's ALLOW. It checks
// the approval offline against the guard's JWKS and the arguments it is
// about to execute, claims it once in the shared ledger, executes, and
// records the outcome.
func Example_backend() {
	ctx := context.Background()
	guardURL, token, stop := exampleGuard()
	defer stop()
	kv, stopNATS := exampleBucket(ctx)
	defer stopNATS()

	// At start: the guard's public keys (cached, refetched for a new key)
	// and the ledger.
	keys, err := approval.NewRemoteJWKS(ctx, guardURL+approval.JWKSPath, approval.RemoteOptions{})
	if err != nil {
		log.Fatal(err) // cannot verify: refuse every approval until it can
	}
	verifier := approval.NewVerifier(keys, approval.VerifierOptions{})
	ledger, err := approval.NewLedger(ctx, kv, approval.LedgerOptions{Replica: "appeals-1"})
	if err != nil {
		log.Fatal(err)
	}

	// Per request: the arguments exactly as the backend will execute them.
	var args map[string]any
	if err := json.Unmarshal([]byte(`{"appeal_id":"A-17","amount":120.50}`), &args); err != nil {
		log.Fatal(err)
	}
	claims, err := verifier.VerifyFor(token, "submit_appeal", args)
	if err != nil {
		// errors.Is(err, approval.ErrExpired), ErrMismatch, ErrSignature...
		fmt.Println("refused:", err)
		return
	}
	fmt.Printf("verified: %s for call %s, decision %s\n", claims.Tool, claims.CallID, claims.DecisionID)
	receipt, err := ledger.Redeem(ctx, claims)
	if err != nil {
		fmt.Println("refused:", err) // ErrAlreadyRedeemed: another request got it first
		return
	}
	fmt.Println("redeemed: executing once")
	if err := submitAppeal(args); err != nil {
		// Failed: a retry may redeem again. Only the receipt releases it.
		_ = ledger.Release(ctx, claims.DecisionID, receipt)
		return
	}
	if err := ledger.Done(ctx, claims.DecisionID); err != nil {
		log.Print(err)
	}

	// A replay of the same request, and a request with other arguments.
	_, err = verifier.VerifyFor(token, "submit_appeal", args)
	_, again := ledger.Redeem(ctx, claims)
	fmt.Println("replay verifies:", err == nil, "redeems:", again == nil)
	_, err = verifier.VerifyFor(token, "submit_appeal", map[string]any{"appeal_id": "A-18", "amount": 120.5})
	fmt.Println("other arguments refused:", errors.Is(err, approval.ErrMismatch))

	// Output:
	// verified: submit_appeal for call c1, decision 01KB4Z3Q8K0V6YH1ZB2R9M7T4E
	// redeemed: executing once
	// replay verifies: true redeems: false
	// other arguments refused: true
}

func submitAppeal(map[string]any) error { return nil }

// exampleGuard stands for the guard: it serves its JWKS and has allowed
// one submit_appeal, whose approval it returns.
func exampleGuard() (url, token string, stop func()) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		log.Fatal(err)
	}
	keys, err := approval.NewKeySet([]approval.Key{{ID: "2026-12", Private: priv}}, approval.KeySetOptions{})
	if err != nil {
		log.Fatal(err)
	}
	canon, err := approval.CanonicalJSON([]byte(`{"appeal_id":"A-17","amount":120.5}`))
	if err != nil {
		log.Fatal(err)
	}
	token, _, err = approval.NewSigner(keys, approval.SignerOptions{}).Sign(approval.Approval{
		DecisionID: "01KB4Z3Q8K0V6YH1ZB2R9M7T4E",
		CallID:     "c1",
		Tool:       "submit_appeal",
		ArgsHash:   approval.ArgsHash(canon),
		Turn:       &approval.Turn{TextHash: approval.TextHash("Yes, please."), StartMs: 41200, EndMs: 41950, ReceivedAt: time.Now()},
	})
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(approval.JWKSHandler(keys, 0))
	return srv.URL, token, srv.Close
}

// exampleBucket stands for the JetStream the backend shares with the
// guard: an embedded server and the ledger's bucket.
func exampleBucket(ctx context.Context) (jetstream.KeyValue, func()) {
	dir, err := os.MkdirTemp("", "approval-example")
	if err != nil {
		log.Fatal(err)
	}
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true, JetStream: true, StoreDir: dir})
	if err != nil {
		log.Fatal(err)
	}
	ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		log.Fatal("nats not ready")
	}
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		log.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}
	kv, err := js.CreateKeyValue(ctx, approval.LedgerBucketConfig("approvals", approval.LedgerOptions{}))
	if err != nil {
		log.Fatal(err)
	}
	return kv, func() {
		nc.Close()
		ns.Shutdown()
		ns.WaitForShutdown()
		os.RemoveAll(dir)
	}
}
