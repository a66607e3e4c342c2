// Package inproc builds the engine in process, with no NATS and no gRPC:
// a transcript store fed directly, a memory dedupe book, and the policy and
// locales from their files, as serve loads them. `yesguard test` and
// `yesguard replay` judge through it under the same rules and timing as a
// running guard.
package inproc

import (
	"errors"
	"fmt"
	"time"

	"github.com/yesguard/yesguard/dedupe"
	"github.com/yesguard/yesguard/guard"
	"github.com/yesguard/yesguard/patterns"
	"github.com/yesguard/yesguard/transcript"
)

// Engine is one in-process guard and the state it judges on.
type Engine struct {
	Guard  *guard.Guard
	Store  *transcript.Store
	Book   *dedupe.Memory
	Policy *guard.Policy
}

// Options adjust the engine.
type Options struct {
	// Feed is called where a running guard asks its transcript feed's
	// state: at the start of each Check, and after its wait. Nil is a feed
	// always live.
	Feed func() (guard.FeedState, string)
	// Now is the engine's clock; nil is time.Now.
	Now func() time.Time
}

// New loads the policy (empty path: the default policy) and the locales
// (empty dir: the built-in ones), reporting both failures, and builds the
// engine.
func New(policyPath, localesDir string, o Options) (*Engine, error) {
	var errs []error
	pol, err := guard.LoadPolicy(policyPath)
	if err != nil {
		errs = append(errs, fmt.Errorf("policy: %w", err))
	}
	locs, err := patterns.Load(localesDir)
	if err != nil {
		errs = append(errs, fmt.Errorf("locales: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	e := &Engine{Store: transcript.NewStore(transcript.Limits{}, nil), Book: dedupe.NewMemory(nil), Policy: pol}
	e.Guard, err = guard.New(guard.Config{Policy: pol, Locales: locs, Store: e.Store, Book: e.Book, Feed: o.Feed, Now: o.Now})
	if err != nil {
		return nil, fmt.Errorf("policy %q with locales %q: %w", policyPath, localesDir, err)
	}
	return e, nil
}
