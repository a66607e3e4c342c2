// Package decisions keeps the decision records that ListDecisions serves.
// A Store is where they are kept: Memory holds them in this process, for
// one replica; the records of every replica on one NATS go to a JetStream
// stream that each of them reads.
//
// Rules that hold:
//   - A record is never changed once added: the log writer, the store and
//     the gRPC answer share it.
//   - List returns a call's records oldest first, in pages of at most
//     MaxPageSize; a page token names where the next page starts.
//   - Recent returns each call's Headline record (its newest ALLOW or
//     REFUSE, else its newest record), the calls whose newest record is
//     newest first, at most MaxRecent of them.
//   - What a Memory holds is bounded: records per call, bytes in all, and
//     a call is forgotten a while after its last record.
//   - The per-call bound never makes room for repeats with the records that
//     matter: each record has a Class, and a class's records are bounded on
//     their own (on the stream: per subject; in a Memory: the lowest class
//     held is dropped first). An ALLOW, a Complete or a Redeem is dropped
//     only for more of those in the same call.
//   - On the stream, a record not stored at once is queued, and with a
//     spool (Stream.OpenSpool) kept on disk until it is: a crash loses
//     none that Add reported queued. While NATS is not connected nothing
//     waits for it: Add queues at once, List and Recent fail at once.
package decisions

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"

	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
)

// MaxPageSize bounds the records of one List page; it is also the default.
const MaxPageSize = 1000

// MaxRecent bounds the calls of one Recent answer; it is also the default.
const MaxRecent = 500

// ErrBadPageToken is returned by List for a token it did not issue.
var ErrBadPageToken = errors.New("page_token: not one this guard issued")

// Store keeps decision records for ListDecisions. Implementations are
// safe for concurrent use.
type Store interface {
	// Add keeps d. An error means it could not be stored (it is still in
	// the decision log); d must not be changed afterwards.
	Add(ctx context.Context, d *yesguardv1.Decision) error
	// List returns up to pageSize (at most MaxPageSize) of the call's
	// records, oldest first, starting where pageToken says ("" for the
	// first page), and the token of the next page ("" when none follows).
	List(ctx context.Context, callID string, pageSize int, pageToken string) ([]*yesguardv1.Decision, string, error)
	// Recent returns the Headline record of each of up to limit calls (at
	// most MaxRecent; <= 0 means MaxRecent), the call whose newest record
	// is newest first: the list of recent calls the timeline page shows.
	Recent(ctx context.Context, limit int) ([]*yesguardv1.Decision, error)
}

// recentLimit turns a Recent limit into the one Recent uses.
func recentLimit(n int) int {
	if n <= 0 || n > MaxRecent {
		return MaxRecent
	}
	return n
}

// pageSize turns a request's page size into the one List uses.
func pageSize(n int) int {
	if n <= 0 || n > MaxPageSize {
		return MaxPageSize
	}
	return n
}

// Class is what a record is to the per-call bound; a higher class is kept
// over a lower one.
type Class int

// Classes, lowest first.
const (
	// ClassRepeat: DUPLICATE and IGNORED, the answers to a repeat.
	ClassRepeat Class = iota
	// ClassRefusal: every other record that allowed nothing.
	ClassRefusal
	// ClassAction: an ALLOW, a Complete, a Redeem: what ran and how it
	// ended.
	ClassAction
)

// ClassOf is d's class.
func ClassOf(d *yesguardv1.Decision) Class {
	switch {
	case d.GetKind() == yesguardv1.DecisionKind_DECISION_KIND_COMPLETE,
		d.GetKind() == yesguardv1.DecisionKind_DECISION_KIND_REDEEM,
		d.GetOutcome() == yesguardv1.Outcome_OUTCOME_ALLOW:
		return ClassAction
	case d.GetOutcome() == yesguardv1.Outcome_OUTCOME_DUPLICATE,
		d.GetOutcome() == yesguardv1.Outcome_OUTCOME_IGNORED:
		return ClassRepeat
	}
	return ClassRefusal
}

// CallSubjects are the subjects of the call's records on a decision stream
// with prefix: its classes' subjects, and the one subject its records were
// on before they had classes.
func CallSubjects(prefix, callID string) []string {
	return []string{prefix + "." + callID, prefix + "." + callID + ".>"}
}

// subjectSuffix is the tail of d's subject after <prefix>.<call_id>: a
// for the actions, x for the refusals, d.<action> for the repeats of one
// action (a hash of its tool and arguments' hash), so that the stream's
// per-subject bound caps each on its own.
func subjectSuffix(d *yesguardv1.Decision) string {
	switch ClassOf(d) {
	case ClassAction:
		return "a"
	case ClassRepeat:
		h := sha256.Sum256([]byte(d.GetTool() + "\x00" + d.GetArgsHash()))
		return "d." + hex.EncodeToString(h[:8])
	}
	return "x"
}
