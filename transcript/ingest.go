package transcript

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

const (
	// Pending limits of the subscription: generous, so a burst queues in
	// the client instead of being dropped as a slow consumer.
	pendingMsgs  = 1 << 20
	pendingBytes = 256 << 20

	// drainTimeout bounds how long Stop waits for received messages to be
	// applied.
	drainTimeout = 2 * time.Second

	// At most logFirst rejects are logged per logTick; the rest are only
	// counted.
	logTick  = time.Second
	logFirst = 5
)

func newIngester(nc *nats.Conn, prefix string, store *Store, limits Limits, log *zap.Logger, m *Metrics) *Ingester {
	limits.SetDefaults()
	if log == nil {
		log = zap.NewNop()
	}
	log = log.Named("transcript").WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return zapcore.NewSamplerWithOptions(c, logTick, logFirst, 0)
	}))
	return &Ingester{nc: nc, prefix: prefix, store: store, limits: limits, log: log, m: m}
}

func (in *Ingester) start() error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.sub != nil {
		return errors.New("transcript: ingester already started")
	}
	if in.nc == nil {
		return errors.New("transcript: no NATS connection")
	}
	sub, err := in.nc.Subscribe(in.prefix+".>", func(msg *nats.Msg) {
		in.handle(msg.Subject, msg.Data)
	})
	if err != nil {
		return fmt.Errorf("transcript: subscribe %s.>: %w", in.prefix, err)
	}
	if err := sub.SetPendingLimits(pendingMsgs, pendingBytes); err != nil {
		_ = sub.Unsubscribe()
		return fmt.Errorf("transcript: set pending limits: %w", err)
	}
	in.sub = sub
	return nil
}

func (in *Ingester) stop() error {
	in.mu.Lock()
	sub := in.sub
	in.sub = nil
	in.mu.Unlock()
	if sub == nil {
		return nil
	}

	// Listen before draining, so the close cannot be missed. The
	// subscription closes once its callback has returned for every message
	// already received.
	closed := sub.StatusChanged(nats.SubscriptionClosed)
	if err := sub.Drain(); err != nil {
		if errors.Is(err, nats.ErrConnectionClosed) || errors.Is(err, nats.ErrBadSubscription) {
			return nil // the connection is gone; nothing more will arrive
		}
		_ = sub.Unsubscribe()
		return fmt.Errorf("transcript: drain: %w", err)
	}
	t := time.NewTimer(drainTimeout)
	defer t.Stop()
	select {
	case <-closed:
		return nil
	case <-t.C:
		_ = sub.Unsubscribe()
		return fmt.Errorf("transcript: drain did not finish within %s", drainTimeout)
	}
}

func (in *Ingester) handle(subject string, data []byte) {
	ev, err := Decode(in.prefix, subject, data, in.limits)
	if err != nil {
		rejected(in.log, in.m, in.store, in.prefix, subject, data, err)
		return
	}
	if ok, reason := in.store.Apply(ev, time.Now()); !ok {
		dropped(in.log, in.m, in.store, ev, reason)
	}
}

// rejected counts and logs (sampled, and without the text: transcripts
// are personal data) an event Decode rejected; fields name its message.
// Any rejected event on a call's subject makes that call, when held,
// uncertain: malformed or too large, it may have carried the caller's
// latest words ("Wait, no."), and the guard cannot vouch for a yes before
// it. The subject names the call even when the body does not parse or
// names another.
func rejected(log *zap.Logger, m *Metrics, store *Store, prefix, subject string, data []byte, err error, fields ...zap.Field) {
	reason, detail, limit := ReasonBadJSON, err.Error(), ""
	var re *RejectError
	if errors.As(err, &re) {
		reason, detail, limit = re.Reason, re.Detail, re.Limit
	}
	count(m, reason, limit)
	fields = append([]zap.Field{
		zap.String("reason", reason), zap.String("subject", subject),
		zap.Int("bytes", len(data)), zap.String("detail", detail)}, fields...)
	why := lostTo(reason, detail)
	if limit != "" {
		fields = append(fields, zap.String("limit", limit))
	} else {
		why = rejectedFrom(reason, detail)
	}
	if id, ok := subjectCallID(prefix, subject); ok && store.MarkDropped(id, why) {
		fields = append(fields, zap.Bool("call_uncertain", true))
	}
	log.Warn("transcript event rejected", fields...)
}

// rejectedFrom is what Snapshot.Gap says of a call a malformed event on
// its subject was rejected from.
func rejectedFrom(reason, detail string) string {
	return "an event of this call was rejected as malformed (" + reason + ": " + clipDetail(detail) + "); the caller's latest words may be missing until the agent speaks again"
}

// clipDetail bounds a reject's detail for a call's gap (it may quote a
// JSON error about publisher-chosen bytes).
func clipDetail(s string) string {
	const max = 120
	if len(s) > max {
		s = s[:max] + "..."
	}
	return strings.ToValidUTF8(s, "\uFFFD") // the gap is sent as a proto string
}

// dropped counts and logs (sampled) an event the store did not apply: a
// repeat, a seq jump that left its call uncertain, or a limit (calls
// held, bytes in all, events a second), which the line explains.
func dropped(log *zap.Logger, m *Metrics, store *Store, ev Event, reason string, fields ...zap.Field) {
	limit := limitOf[reason]
	count(m, reason, limit)
	fields = append([]zap.Field{
		zap.String("reason", reason), zap.String("call_id", ev.CallID), zap.String("source", ev.Source),
		zap.Uint64("epoch", ev.Epoch), zap.Uint64("seq", ev.Seq)}, fields...)
	if limit != "" {
		l := store.Limits()
		fields = append(fields, zap.String("limit", limit), zap.String("detail", l.explain(reason)))
	}
	log.Warn("transcript event dropped", fields...)
}

func count(m *Metrics, reason, limit string) {
	if m != nil {
		m.EventsRejected.WithLabelValues(reason).Inc()
		if limit != "" {
			m.LimitHits.WithLabelValues(limit).Inc()
		}
	}
}
