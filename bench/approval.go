package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/yesguard/yesguard/approval"
	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
)

// What signed approvals add (issue 12): signing one per ALLOW, and the
// system of record's Redeem of each.

// signRounds is how many approvals the signing measure signs.
const signRounds = 5000

// maxRedeems bounds the ALLOWs whose approvals the redeem pass redeems.
const maxRedeems = 4000

// issued is an ALLOW's approval and the arguments it was given for.
type issued struct {
	token string
	args  *structpb.Struct
}

// signing times approval.Signer.Sign as the guard calls it for every
// ALLOW (an Ed25519 key, an ALLOW of bookTool resting on a caller turn),
// in the bench process, and returns the latencies and a token's size.
func signing() (lat, int, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, 0, err
	}
	keys, err := approval.NewKeySet([]approval.Key{{ID: "bench", Private: priv}}, approval.KeySetOptions{})
	if err != nil {
		return nil, 0, err
	}
	signer := approval.NewSigner(keys, approval.SignerOptions{})
	canon, err := approval.CanonicalArgs(slotArgs(1))
	if err != nil {
		return nil, 0, err
	}
	a := approval.Approval{
		DecisionID: "01KB4Z3Q8K0V6YH1ZB2R9M7T4E", CallID: "allow-bench-1", Tool: bookTool, ArgsHash: approval.ArgsHash(canon),
		Turn: &approval.Turn{TextHash: approval.TextHash("Yes please."), StartMs: 41200, EndMs: 41950, ReceivedAt: time.Now()},
	}
	out := make(lat, 0, signRounds)
	size := 0
	for range signRounds {
		t0 := time.Now()
		token, _, err := signer.Sign(a)
		out = append(out, time.Since(t0))
		if err != nil {
			return nil, 0, err
		}
		size = len(token)
	}
	return out, size, nil
}

// redeemPass redeems each approval once, as a backend would just before
// it acts, interleaved with the guard's health check, for at most d. It
// returns both latencies, and counts a redeem answered otherwise than
// REDEEMED.
func (b *bench) redeemPass(ctx context.Context, approvals []issued, d time.Duration) (redeems, health lat, bad int, firstBad string, err error) {
	end := time.Now().Add(d)
	for i, a := range approvals {
		if time.Now().After(end) {
			break
		}
		if i%2 == 1 {
			t0 := time.Now()
			if err := b.ping(ctx); err != nil {
				return nil, nil, 0, "", fmt.Errorf("health check: %w", err)
			}
			health = append(health, time.Since(t0))
		}
		rctx, cancel := context.WithTimeout(ctx, checkTimeout)
		t0 := time.Now()
		resp, err := b.guard.Redeem(rctx, &yesguardv1.RedeemRequest{Approval: a.token, Args: a.args, Tool: bookTool})
		el := time.Since(t0)
		cancel()
		if err != nil {
			return nil, nil, 0, "", fmt.Errorf("redeem: %w", err)
		}
		redeems = append(redeems, el)
		if resp.GetReason() != yesguardv1.Reason_REASON_REDEEMED {
			bad++
			if firstBad == "" {
				firstBad = fmt.Sprintf("%s: %s", resp.GetReason(), resp.GetMessage())
			}
		}
	}
	return redeems, health, bad, firstBad, nil
}

// approvalRows measures signing and redeems the approvals the overhead
// phase's ALLOWs carried. allowInside is the ALLOW handler's p50 when the
// guard's handlers were timed (0 otherwise).
func (b *bench) approvalRows(ctx context.Context, approvals []issued, allowInside time.Duration, d time.Duration) error {
	sign, size, err := signing()
	if err != nil {
		return fmt.Errorf("signing: %w", err)
	}
	floor, share := "-", "-"
	if allowInside > 0 {
		floor, share = us(allowInside), ratio(float64(sign.pct(50)), float64(allowInside))
	}
	b.rows = append(b.rows, row{
		fmt.Sprintf("  approval signing p50 (n=%d) vs the ALLOW handler's p50", len(sign)),
		us(sign.pct(50)), floor, share, "what signing adds to an ALLOW", "",
	})
	b.notes = append(b.notes, fmt.Sprintf("approvals: signing is approval.Signer.Sign (Ed25519, compact JWS) timed in the bench process, as the guard calls it once per ALLOW; a token is %d bytes, carried in each ALLOW answer (its size above includes it); p99 %s", size, us(sign.pct(99))))
	if len(approvals) == 0 {
		b.notes = append(b.notes, "approvals: no ALLOW carried an approval, so no redeem was timed")
		return nil
	}
	redeems, health, bad, firstBad, err := b.redeemPass(ctx, approvals, d)
	if err != nil {
		return err
	}
	hp50, hp99 := health.pct(50), health.pct(99)
	b.rows = append(b.rows,
		row{fmt.Sprintf("Redeem p50 (n=%d) vs health", len(redeems)), us(redeems.pct(50)), us(hp50), ratio(float64(redeems.pct(50)), float64(hp50)), "verify, claim once, record", ""},
		row{"Redeem p99 vs health", us(redeems.pct(99)), us(hp99), ratio(float64(redeems.pct(99)), float64(hp99)), "", ""},
	)
	if bad > 0 {
		b.notes = append(b.notes, fmt.Sprintf("redeem: %d redeems had another outcome, e.g. %s", bad, firstBad))
	}
	return nil
}
