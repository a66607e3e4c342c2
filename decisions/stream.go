package decisions

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
)

// DefaultSubjectPrefix: a call's records are on <prefix>.<call_id>.<class>.
const DefaultSubjectPrefix = "yesguard.decisions"

// StreamConfig is the decision stream: every replica's records, on
// <prefix>.<call_id>.a (ALLOW, Complete, Redeem), .x (refusals) and
// .d.<action> (the repeats of one action), kept for maxAge and at most
// maxBytes in all, and perCall per subject (the oldest discarded first):
// so perCall actions and perCall refusals a call, and perCall repeats an
// action, and no flood of repeats discards an ALLOW. A duplicate window
// keeps a record stored twice (a retried publish) once.
func StreamConfig(name, prefix string, maxAge time.Duration, maxBytes, perCall int64, replicas int) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:              name,
		Description:       "yesguard: the decision records of every call",
		Subjects:          []string{prefix + ".>"},
		Retention:         jetstream.LimitsPolicy,
		Discard:           jetstream.DiscardOld,
		MaxAge:            maxAge,
		MaxBytes:          maxBytes,
		MaxMsgsPerSubject: perCall,
		Duplicates:        min(2*time.Minute, maxAge),
		Storage:           jetstream.FileStorage,
		Replicas:          max(replicas, 1),
	}
}

// Stream is a Store on a JetStream stream: ListDecisions on any replica
// reads every replica's records. Each record is one message of protojson
// (the decision log's shape), with its decision id as Nats-Msg-Id.
//
// A record the stream does not take within Add's context (NATS down, a
// node lost) is queued and published again, with backoff, until it is
// stored: at most retryQueue records wait, and one that does not fit is
// dropped and counted (it is still in the decision log). While the
// connection is down, Add queues at once and List and Recent fail at once
// (ErrUnavailable): no answer waits for a NATS that is not there.
type Stream struct {
	js jetstream.JetStream
	// read serves List and Recent: js, or a connection of their own
	// (ReadOn), so that a reader of large pages never slows the
	// connection Checks store their records and read the transcript on.
	read   jetstream.JetStream
	stream string
	prefix string

	retry   chan *yesguardv1.Decision
	stop    chan struct{}
	done    chan struct{}
	queued  atomic.Int64
	dropped atomic.Int64

	// spool keeps the queued records on disk (spool.go); nil: memory only.
	spool *spool
}

var _ Store = (*Stream)(nil)

// ErrUnavailable: the connection to NATS is down, so the stream was not
// asked.
var ErrUnavailable = errors.New("decisions: NATS is not connected")

// connected reports whether the stream can be asked now.
func (s *Stream) connected() bool { return s.js.Conn().IsConnected() }

// readable reports whether List and Recent can ask the stream now.
func (s *Stream) readable() bool { return s.read.Conn().IsConnected() }

// ReadOn makes List and Recent read on js, a connection of their own, from
// now on. Call it before the store is used.
func (s *Stream) ReadOn(js jetstream.JetStream) { s.read = js }

// retryQueue bounds the records waiting to be stored again.
const retryQueue = 16384

// NewStream returns a store on the stream named stream, whose subjects are
// <prefix>.>. Close stops its retries.
func NewStream(js jetstream.JetStream, stream, prefix string) *Stream {
	s := &Stream{js: js, read: js, stream: stream, prefix: prefix, retry: make(chan *yesguardv1.Decision, retryQueue), stop: make(chan struct{}), done: make(chan struct{})}
	go s.retrier()
	return s
}

// Close stops retrying; records still queued are given until ctx ends.
func (s *Stream) Close(ctx context.Context) error {
	close(s.stop)
	<-s.done
	for {
		select {
		case d := <-s.retry:
			if err := s.publish(ctx, d); err != nil {
				s.closeSpool() // they stay in its file, for the next start
				s.dropped.Add(int64(1 + len(s.retry)))
				return fmt.Errorf("decisions: %d records not stored: %w", 1+len(s.retry), err)
			}
			s.stored()
		default:
			s.closeSpool()
			return nil
		}
	}
}

// Queued is how many records wait to be stored again; Dropped how many
// were given up.
func (s *Stream) Queued() int64  { return s.queued.Load() }
func (s *Stream) Dropped() int64 { return s.dropped.Load() }

// stored counts one queued record stored.
func (s *Stream) stored() {
	if s.spool != nil {
		s.spool.stored() // first: Queued 0 means the spool is empty
	}
	s.queued.Add(-1)
}

func (s *Stream) closeSpool() {
	if s.spool != nil {
		s.spool.close()
	}
}

func (s *Stream) retrier() {
	defer close(s.done)
	for {
		select {
		case <-s.stop:
			return
		case d := <-s.retry:
			for backoff := 50 * time.Millisecond; ; backoff = min(2*backoff, 2*time.Second) {
				err := ErrUnavailable
				if s.connected() {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					err = s.publish(ctx, d)
					cancel()
				}
				if err == nil {
					s.stored()
					break
				}
				select {
				case <-s.stop:
					s.retry <- d // Close publishes it
					return
				case <-time.After(backoff):
				}
			}
		}
	}
}

var recordJSON = protojson.MarshalOptions{UseProtoNames: true}

// Add publishes d and waits, within ctx, for the stream to store it, so
// that a Check answered is, as a rule, a Check recorded; otherwise d is
// queued to be stored again, and Add says so.
func (s *Stream) Add(ctx context.Context, d *yesguardv1.Decision) error {
	err := ErrUnavailable
	if s.connected() {
		if err = s.publish(ctx, d); err == nil {
			return nil
		}
	}
	if s.spool != nil {
		if serr := s.spool.append(d); serr != nil {
			err = errors.Join(err, serr)
		}
	}
	select {
	case s.retry <- d:
		s.queued.Add(1)
		return fmt.Errorf("%w (queued to be stored again)", err)
	default:
		s.dropped.Add(1)
		return fmt.Errorf("%w (dropped: %d records already wait)", err, retryQueue)
	}
}

func (s *Stream) publish(ctx context.Context, d *yesguardv1.Decision) error {
	data, err := recordJSON.Marshal(d)
	if err != nil {
		return fmt.Errorf("decisions: encode %s: %w", d.GetDecisionId(), err)
	}
	msg := &nats.Msg{Subject: s.prefix + "." + d.GetCallId() + "." + subjectSuffix(d), Data: data}
	if _, err := s.js.PublishMsg(ctx, msg, jetstream.WithMsgID(d.GetDecisionId()), jetstream.WithExpectStream(s.stream)); err != nil {
		return fmt.Errorf("decisions: store %s: %w", d.GetDecisionId(), err)
	}
	return nil
}

// listWait bounds how long List waits for a page's messages.
const listWait = 5 * time.Second

// listBatch bounds the messages one fetch of List asks for.
const listBatch = 64

// List reads a page of the call's records from the stream. Its token is
// the stream sequence the next page starts at.
func (s *Stream) List(ctx context.Context, callID string, size int, token string) ([]*yesguardv1.Decision, string, error) {
	size = pageSize(size)
	if !s.readable() {
		return nil, "", ErrUnavailable
	}
	cfg := jetstream.ConsumerConfig{
		FilterSubjects:    CallSubjects(s.prefix, callID),
		DeliverPolicy:     jetstream.DeliverAllPolicy,
		AckPolicy:         jetstream.AckNonePolicy,
		InactiveThreshold: time.Minute,
		MemoryStorage:     true,
		Replicas:          1,
	}
	if token != "" {
		seq, err := strconv.ParseUint(token, 10, 64)
		if err != nil || seq == 0 {
			return nil, "", ErrBadPageToken
		}
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, seq
	}
	var cons jetstream.Consumer
	var err error
	for attempt := 0; ; attempt++ {
		// A cluster electing a leader answers no one for a moment.
		if cons, err = s.read.CreateConsumer(ctx, s.stream, cfg); err == nil || attempt == 4 || ctx.Err() != nil {
			break
		}
		time.Sleep(time.Duration(50<<attempt) * time.Millisecond)
	}
	if err != nil {
		return nil, "", fmt.Errorf("decisions: read %s: %w", callID, err)
	}
	defer func() { _ = s.read.DeleteConsumer(context.WithoutCancel(ctx), s.stream, cons.CachedInfo().Name) }()
	pending := cons.CachedInfo().NumPending
	if pending == 0 {
		return nil, "", nil
	}
	want := min(uint64(size), pending)
	var out []*yesguardv1.Decision
	var last uint64           // the stream sequence of the last message the page took
	used := 0                 // the page's bytes (MaxPageBytes)
	full := false             // the page ended at its byte budget, before a record
	seen := map[string]bool{} // a record the spool stored twice is listed once
	for n := uint64(0); n < want && !full; {
		// Small batches: the messages fetched past the budget are read
		// for nothing, and what one fetch holds is in memory at once.
		batch, err := cons.Fetch(int(min(want-n, listBatch)), jetstream.FetchMaxWait(listWait))
		if err != nil {
			return nil, "", fmt.Errorf("decisions: read %s: %w", callID, err)
		}
		got := uint64(0)
		for msg := range batch.Messages() {
			got++
			if full {
				continue // drained, not taken: the next page starts at it
			}
			seq := uint64(0)
			if meta, err := msg.Metadata(); err == nil {
				seq = meta.Sequence.Stream
			}
			d := new(yesguardv1.Decision)
			if err := protojson.Unmarshal(msg.Data(), d); err != nil {
				last = max(last, seq)
				continue // not a record: skipped, never fatal
			}
			if seen[d.GetDecisionId()] {
				last = max(last, seq)
				continue
			}
			sz := proto.Size(d)
			if !fits(used, sz) {
				full = true
				continue
			}
			used += sz
			last = max(last, seq)
			seen[d.GetDecisionId()] = true
			out = append(out, d)
		}
		if err := batch.Error(); err != nil && got == 0 {
			return nil, "", fmt.Errorf("decisions: read %s: %w", callID, err)
		}
		if got == 0 {
			break
		}
		n += got
	}
	next := ""
	if (pending > want || full) && last != 0 {
		next = strconv.FormatUint(last+1, 10)
	}
	return out, next, nil
}

// Bounds of Recent: at most recentCalls calls, found among the stream's
// last recentScan records.
const (
	recentCalls = 500
	recentScan  = 20000
)

// Recent returns the Headline record of each of up to limit calls (at most
// 500; <= 0 means 500), the call whose newest record is newest first: the
// list of recent calls a timeline page shows. It reads the tail of the
// stream, its last 20000 records, so a call quiet for longer than that
// many records is not in it.
func (s *Stream) Recent(ctx context.Context, limit int) ([]*yesguardv1.Decision, error) {
	if limit <= 0 || limit > recentCalls {
		limit = recentCalls
	}
	if !s.readable() {
		return nil, ErrUnavailable
	}
	st, err := s.read.Stream(ctx, s.stream)
	if err != nil {
		return nil, fmt.Errorf("decisions: recent calls: %w", err)
	}
	state := st.CachedInfo().State
	if state.Msgs == 0 {
		return nil, nil
	}
	start := state.FirstSeq
	if state.LastSeq >= recentScan && state.LastSeq-recentScan+1 > start {
		start = state.LastSeq - recentScan + 1
	}
	cons, err := s.read.CreateConsumer(ctx, s.stream, jetstream.ConsumerConfig{
		FilterSubject: s.prefix + ".>", DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: start,
		AckPolicy: jetstream.AckNonePolicy, InactiveThreshold: time.Minute, MemoryStorage: true, Replicas: 1,
	})
	if err != nil {
		return nil, fmt.Errorf("decisions: recent calls: %w", err)
	}
	defer func() { _ = s.read.DeleteConsumer(context.WithoutCancel(ctx), s.stream, cons.CachedInfo().Name) }()
	newest := map[string]*yesguardv1.Decision{}
	headline := map[string]*yesguardv1.Decision{}
	for left := cons.CachedInfo().NumPending; left > 0; {
		batch, err := cons.Fetch(int(min(left, 1000)), jetstream.FetchMaxWait(listWait))
		if err != nil {
			return nil, fmt.Errorf("decisions: recent calls: %w", err)
		}
		n := 0
		for msg := range batch.Messages() {
			n++
			d := new(yesguardv1.Decision)
			if protojson.Unmarshal(msg.Data(), d) == nil {
				newest[d.GetCallId()] = d // later in the stream wins
				headline[d.GetCallId()] = Headline(headline[d.GetCallId()], d)
			}
		}
		if n == 0 {
			break
		}
		left -= uint64(n)
	}
	out := make([]*yesguardv1.Decision, 0, len(newest))
	for _, d := range newest {
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b *yesguardv1.Decision) int {
		return b.GetTime().AsTime().Compare(a.GetTime().AsTime())
	})
	out = out[:min(limit, len(out))]
	for i, d := range out {
		out[i] = headline[d.GetCallId()]
	}
	return out, nil
}
