package approval

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"
)

// BenchmarkSign is what issuing the approval adds to an ALLOW.
func BenchmarkSign(b *testing.B) {
	f := newFixture(b)
	a := testApproval(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := f.signer.Sign(a); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerify is a backend's offline check of one approval against
// the action it is about to execute, and the guard's own check in Redeem.
func BenchmarkVerify(b *testing.B) {
	f := newFixture(b)
	a := testApproval(b)
	token, _ := f.sign(b, a)
	for name, v := range map[string]*Verifier{"jwks": f.jwksVerifier(b), "keyset": NewVerifier(f.keys, f.opts)} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.VerifyAction(token, Action{Tool: a.Tool, ArgsHash: a.ArgsHash}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("for-map", func(b *testing.B) {
		v := f.jwksVerifier(b)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := v.VerifyFor(token, a.Tool, testArgs); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkCanonicalArgs is the hashing every Check does.
func BenchmarkCanonicalArgs(b *testing.B) {
	s, err := structpb.NewStruct(map[string]any{
		"appeal_id": "A-17", "amount": 120.5, "notify": map[string]any{"email": "ana@example.com", "sms": false},
		"items": []any{map[string]any{"sku": "X-1", "qty": 2}},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		canon, err := CanonicalArgs(s)
		if err != nil {
			b.Fatal(err)
		}
		_ = ArgsHash(canon)
	}
}

// BenchmarkRedeem is one ledger claim (a KV Create) on an embedded
// JetStream, round trip included.
func BenchmarkRedeem(b *testing.B) {
	ns := startJetStream(b)
	r := connectReplica(b, ns, "approvals", "bench", LedgerOptions{})
	ctx := context.Background()
	exp := time.Now().Add(DefaultTTL)
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		i++
		if _, err := r.ledger.Redeem(ctx, ledgerClaims(fmt.Sprintf("B%09d", i), exp)); err != nil {
			b.Fatal(err)
		}
	}
}
