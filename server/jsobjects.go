package server

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
)

// Creating the guard's streams and bucket when several replicas start at
// once on a fresh cluster (finding 19 of the red team).
//
// nats-server answers only the first of several identical concurrent
// creates of one replicated stream: a later create of the same config is
// proposed again, applied as the same assignment, and never answered (the
// assignment has responded already), so its client waits for its whole
// timeout. Here no create is trusted to answer:
//   - An object that exists is never created: it is read, its settings
//     compared with the guard's, and updated only where they differ.
//   - A create runs while the object is looked for every ensurePoll; the
//     first of "created" and "found" ends the wait, so a create another
//     replica's won costs a poll, not a timeout.
//   - "Already exists" is success (then the settings are checked).
//   - Any other failure is tried again, after a jittered backoff (so that
//     replicas starting together drift apart), until ctx ends.

// ensurePoll is how often an object is looked for while its create runs.
const ensurePoll = 250 * time.Millisecond

// ensureBackoff bounds the pause between two attempts.
const ensureBackoff = 2 * time.Second

// ensureRequest bounds one lookup or update: nats-server leaves a stream
// info request unanswered while the stream has no leader yet (it is being
// created by another replica), so an unbounded lookup would wait out the
// whole set-up. A lookup that times out is tried again.
const ensureRequest = 3 * time.Second

// bounded runs f with ctx bounded by ensureRequest.
func bounded[T any](ctx context.Context, f func(context.Context) (T, []string, error)) (T, []string, error) {
	rctx, cancel := context.WithTimeout(ctx, ensureRequest)
	defer cancel()
	return f(rctx)
}

// jsObject is one stream or bucket as ensure sees it.
type jsObject struct {
	kind, name string
	// lookup reads the object: found, and the settings that differ from
	// the guard's (none: nothing to update).
	lookup func(ctx context.Context) (found bool, differ []string, err error)
	create func(ctx context.Context) error
	update func(ctx context.Context) error
}

// ensure makes obj exist with the guard's settings.
func ensure(ctx context.Context, log *zap.Logger, obj jsObject) error {
	var last error
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			pause := min(ensureBackoff, time.Duration(100<<min(attempt, 5))*time.Millisecond)
			pause = pause/2 + rand.N(pause/2+1) // jitter: replicas started together drift apart
			select {
			case <-ctx.Done():
				return fmt.Errorf("%s %s: %w (last: %v)", obj.kind, obj.name, ctx.Err(), last)
			case <-time.After(pause):
			}
		}
		found, differ, err := bounded(ctx, obj.lookup)
		if err != nil {
			last = err
			log.Debug("JetStream object not readable yet; trying again", zap.String(obj.kind, obj.name), zap.Error(err))
			continue
		}
		if !found {
			if found, err = createOrFind(ctx, obj); err != nil {
				last = err
				log.Debug("JetStream object not created yet; trying again", zap.String(obj.kind, obj.name), zap.Error(err))
				continue
			}
			if !found {
				log.Info("JetStream object created", zap.String(obj.kind, obj.name))
				return nil
			}
			// Another replica made it: check its settings.
			if _, differ, err = bounded(ctx, obj.lookup); err != nil {
				last = err
				continue
			}
		}
		if len(differ) == 0 {
			return nil
		}
		uctx, cancel := context.WithTimeout(ctx, ensureRequest)
		err = obj.update(uctx)
		cancel()
		if err != nil {
			last = err
			log.Debug("JetStream object not updated yet; trying again", zap.String(obj.kind, obj.name), zap.Strings("settings", differ), zap.Error(err))
			continue
		}
		log.Info("JetStream object updated to the guard's settings", zap.String(obj.kind, obj.name), zap.Strings("settings", differ))
		return nil
	}
}

// createOrFind creates obj, and meanwhile looks for it: found is true when
// it turned up made by someone else (or by this create, unanswered), false
// when this create succeeded.
func createOrFind(ctx context.Context, obj jsObject) (found bool, err error) {
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	created := make(chan error, 1)
	go func() { created <- obj.create(cctx) }()
	tick := time.NewTicker(ensurePoll)
	defer tick.Stop()
	for {
		select {
		case err := <-created:
			switch {
			case err == nil:
				return false, nil
			case errors.Is(err, jetstream.ErrStreamNameAlreadyInUse), errors.Is(err, jetstream.ErrBucketExists):
				return true, nil
			}
			return false, err
		case <-tick.C:
			if ok, _, err := bounded(ctx, obj.lookup); err == nil && ok {
				return true, nil
			}
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}

// streamObject is a stream the guard keeps with cfg.
func streamObject(js jetstream.JetStream, cfg jetstream.StreamConfig) jsObject {
	return jsObject{
		kind: "stream", name: cfg.Name,
		lookup: func(ctx context.Context) (bool, []string, error) {
			s, err := js.Stream(ctx, cfg.Name)
			if errors.Is(err, jetstream.ErrStreamNotFound) {
				return false, nil, nil
			}
			if err != nil {
				return false, nil, err
			}
			return true, streamDiffers(s.CachedInfo().Config, cfg), nil
		},
		create: func(ctx context.Context) error { _, err := js.CreateStream(ctx, cfg); return err },
		update: func(ctx context.Context) error { _, err := js.UpdateStream(ctx, cfg); return err },
	}
}

// streamDiffers names the settings the guard sets that got lacks.
func streamDiffers(got, want jetstream.StreamConfig) []string {
	var d differs
	add := d.add
	add("subjects", slices.Equal(got.Subjects, want.Subjects))
	add("description", got.Description == want.Description)
	add("retention", got.Retention == want.Retention)
	add("discard", got.Discard == want.Discard)
	add("max_age", got.MaxAge == want.MaxAge)
	add("max_bytes", got.MaxBytes == want.MaxBytes)
	add("max_msgs_per_subject", got.MaxMsgsPerSubject == want.MaxMsgsPerSubject || want.MaxMsgsPerSubject == 0 && got.MaxMsgsPerSubject == -1)
	add("discard_new_per_subject", got.DiscardNewPerSubject == want.DiscardNewPerSubject)
	add("max_msg_size", got.MaxMsgSize == want.MaxMsgSize || want.MaxMsgSize == 0 && got.MaxMsgSize == -1)
	add("duplicate_window", got.Duplicates == want.Duplicates || want.Duplicates == 0)
	add("storage", got.Storage == want.Storage)
	add("replicas", got.Replicas == max(want.Replicas, 1))
	return d
}

// openBucket opens a bucket ensure made, each request bounded and tried
// again until ctx ends: its stream may not have answered its info yet.
func openBucket(ctx context.Context, js jetstream.JetStream, name string) (jetstream.KeyValue, error) {
	for {
		rctx, cancel := context.WithTimeout(ctx, ensureRequest)
		kv, err := js.KeyValue(rctx, name)
		cancel()
		if err == nil || ctx.Err() != nil {
			return kv, err
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// bucketObject is the KV bucket the guard keeps with cfg.
func bucketObject(js jetstream.JetStream, cfg jetstream.KeyValueConfig) jsObject {
	return jsObject{
		kind: "bucket", name: cfg.Bucket,
		lookup: func(ctx context.Context) (bool, []string, error) {
			kv, err := js.KeyValue(ctx, cfg.Bucket)
			if errors.Is(err, jetstream.ErrBucketNotFound) {
				return false, nil, nil
			}
			if err != nil {
				return false, nil, err
			}
			st, err := kv.Status(ctx)
			if err != nil {
				return false, nil, err
			}
			return true, bucketDiffers(st, cfg), nil
		},
		create: func(ctx context.Context) error { _, err := js.CreateKeyValue(ctx, cfg); return err },
		update: func(ctx context.Context) error { _, err := js.UpdateKeyValue(ctx, cfg); return err },
	}
}

// bucketDiffers names the bucket settings the guard sets that st lacks.
func bucketDiffers(st jetstream.KeyValueStatus, want jetstream.KeyValueConfig) []string {
	got := st.Config()
	var d differs
	add := d.add
	add("description", got.Description == want.Description)
	add("history", got.History == max(want.History, 1))
	add("ttl", got.TTL == want.TTL)
	add("max_value_size", got.MaxValueSize == want.MaxValueSize || want.MaxValueSize == 0 && got.MaxValueSize == -1)
	add("limit_marker_ttl", got.LimitMarkerTTL == want.LimitMarkerTTL)
	add("storage", got.Storage == want.Storage)
	add("replicas", got.Replicas == max(want.Replicas, 1))
	return d
}

// differs collects the names of the settings found different.
type differs []string

func (d *differs) add(name string, same bool) {
	if !same {
		*d = append(*d, name)
	}
}
