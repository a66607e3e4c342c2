package server

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/yesguard/yesguard/approval"
	"github.com/yesguard/yesguard/service"
)

// ApprovalsBucket is the JetStream KV bucket of the approvals' redeem
// ledger, shared by every replica on the NATS. It is not the state
// bucket: the ledger needs a max age (the state bucket has none) and its
// entries must stay out of the book's mirror of the state bucket.
const ApprovalsBucket = "yesguard_approvals"

// KeysDirName is the data directory's folder of approval keys, used when
// no key file or directory is configured.
const KeysDirName = "keys"

// approvals is a server's approval keys and what signs, verifies and
// redeems with them.
type approvals struct {
	keys *approval.KeySet
	// generated: the keys come from the data directory's folder (made at
	// first start), not from files the operator gave.
	generated bool
	svc       *service.Approvals
}

// newApprovals loads the keys and builds the signer, the verifier and the
// ledger: in this process with the memory state, else the JetStream
// bucket's (set up with the rest of the JetStream state).
func (s *Server) newApprovals() error {
	_, ks, err := s.signingKeys()
	if err != nil {
		return err
	}
	a := &approvals{keys: ks, generated: len(s.cfg.ApprovalKeyFiles) == 0 && s.cfg.ApprovalKeyDir == ""}
	a.svc = &service.Approvals{
		Signer:   approval.NewSigner(ks, approval.SignerOptions{Issuer: s.cfg.ApprovalIssuer}),
		Verifier: approval.NewVerifier(ks, approval.VerifierOptions{Issuer: s.cfg.ApprovalIssuer}),
	}
	if s.js != nil {
		a.svc.Ledger = stateLedger{s.js}
	} else {
		a.svc.Ledger = approval.NewMemoryLedger(approval.LedgerOptions{})
	}
	s.approvals = a
	s.logKeys("approval keys loaded")
	if a.generated && s.cfg.NATSURL != "" {
		s.log.Warn("approval keys are this replica's own, in its data directory (" + s.keysDir() + "): " +
			"replicas on one NATS must sign and verify with the same keys, or each refuses the others' approvals (APPROVAL_INVALID). " +
			"Give every replica the same files with --approval-key-dir or --approval-key-file (docs/approvals.md, Keys)")
	}
	return nil
}

// keysDir is the data directory's key folder.
func (s *Server) keysDir() string { return filepath.Join(s.cfg.DataDir, KeysDirName) }

// loadApprovalKeys reads the key files and directory configured, or, with
// none, the data directory's key folder, generating its first key there.
// Configured files and directories must hold at least one key: nothing is
// generated into them.
func (s *Server) loadApprovalKeys() ([]approval.Key, error) {
	c := &s.cfg
	if len(c.ApprovalKeyFiles) == 0 && c.ApprovalKeyDir == "" {
		keys, err := approval.OpenKeyDir(s.keysDir())
		if err != nil {
			return nil, fmt.Errorf("approval keys in the data directory (data_dir): %w", err)
		}
		return keys, nil
	}
	var keys []approval.Key
	var errs []error
	for _, f := range c.ApprovalKeyFiles {
		k, err := approval.LoadKeyFile(f)
		if err != nil {
			errs = append(errs, fmt.Errorf("approval_key_file: %w", err))
			continue
		}
		keys = append(keys, k)
	}
	if d := c.ApprovalKeyDir; d != "" {
		ks, err := approval.LoadKeyDir(d)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("approval_key_dir: %w", err))
		case len(ks) == 0:
			errs = append(errs, fmt.Errorf("approval_key_dir: %s holds no *.pem key: write one (openssl genpkey -algorithm ed25519 -out %s), or leave the key flags unset to have the guard generate one in its data directory",
				d, filepath.Join(d, approval.InitialKeyFile)))
		}
		keys = append(keys, ks...)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return keys, nil
}

// signingKeys reads the keys and makes a key set of them, failing unless
// one of them signs now.
func (s *Server) signingKeys() ([]approval.Key, *approval.KeySet, error) {
	keys, err := s.loadApprovalKeys()
	if err != nil {
		return nil, nil, err
	}
	ks, err := approval.NewKeySet(keys, approval.KeySetOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("approval keys: %w", err)
	}
	if err := signsNow(ks); err != nil {
		return nil, nil, err
	}
	return keys, ks, nil
}

// signsNow fails when no key of ks signs at this moment (every key starts
// later): each ALLOW would then be refused as INTERNAL.
func signsNow(ks *approval.KeySet) error {
	for _, k := range ks.Keys() {
		if k.State == approval.KeySigning {
			return nil
		}
	}
	first := ks.Keys()[0]
	return fmt.Errorf("approval keys: none signs now: the first, %s (%s), starts at %s; give one a Signs-From in the past, or keep the key that signs now",
		first.ID, first.Source, first.SignsFrom.UTC().Format(time.RFC3339))
}

// reloadApprovalKeys reads the keys again and swaps them in at once
// (SIGHUP): a new key is published at once and signs from its Signs-From,
// the old ones verify until their tokens expire. On an error the old keys
// stay.
func (s *Server) reloadApprovalKeys() error {
	keys, _, err := s.signingKeys()
	if err != nil {
		return err
	}
	if err := s.approvals.keys.SetKeys(keys); err != nil {
		return fmt.Errorf("approval keys: %w", err)
	}
	s.logKeys("approval keys reloaded")
	return nil
}

// logKeys logs each key's place in its lifecycle.
func (s *Server) logKeys(msg string) {
	var desc []string
	for _, k := range s.approvals.keys.Keys() {
		d := k.ID + " " + string(k.State)
		switch k.State {
		case approval.KeyNext:
			d += " from " + k.SignsFrom.UTC().Format(time.RFC3339)
		case approval.KeyRetired:
			d += " until " + k.DropAt.UTC().Format(time.RFC3339)
		}
		desc = append(desc, d+" ("+k.Source+")")
		if k.HeldLate && k.State == approval.KeyRetired {
			s.log.Warn("approval key "+k.ID+" was retired by a key whose Signs-From was already past: it is kept until the tokens it signed have expired, not dropped at once; give a new key a Signs-From ahead (an hour), so that every replica and verifier knows it before it signs",
				zap.String("key", k.ID), zap.String("source", k.Source), zap.Time("signed_until", k.RetiredAt), zap.Time("kept_until", k.DropAt))
		}
	}
	s.log.Info(msg, zap.String("keys", strings.Join(desc, "; ")), zap.String("jwks", approval.JWKSPath))
}

// ledgerBucketConfig is the approvals bucket: the ledger's own settings,
// in file storage, with the state's replicas.
func ledgerBucketConfig(replicas int) jetstream.KeyValueConfig {
	cfg := approval.LedgerBucketConfig(ApprovalsBucket, approval.LedgerOptions{})
	cfg.Storage = jetstream.FileStorage
	cfg.Replicas = max(replicas, 1)
	return cfg
}

// setUpLedger creates or updates the approvals bucket and its ledger.
func (s *Server) setUpLedger(ctx context.Context, js jetstream.JetStream) error {
	if s.js.ledger.Load() != nil {
		return nil
	}
	// setUpJetStream ensured the bucket with the others (jsobjects.go).
	kv, err := openBucket(ctx, js, ApprovalsBucket)
	if err != nil {
		return fmt.Errorf("approvals bucket %s: %w", ApprovalsBucket, err)
	}
	l, err := approval.NewLedger(ctx, kv, approval.LedgerOptions{Replica: s.replica})
	if err != nil {
		return err
	}
	s.js.ledger.Store(l)
	return nil
}

// stateLedger is the JetStream state's redeem ledger, refusing (ledger
// unavailable) until it is set up.
type stateLedger struct{ js *jsState }

var _ approval.Redeemer = stateLedger{}

func (l stateLedger) get() (*approval.Ledger, error) {
	if led := l.js.ledger.Load(); led != nil {
		return led, nil
	}
	return nil, fmt.Errorf("%w: %w", approval.ErrLedgerUnavailable, errStateNotReady)
}

func (l stateLedger) Redeem(ctx context.Context, c *approval.Claims) (string, error) {
	led, err := l.get()
	if err != nil {
		return "", err
	}
	return led.Redeem(ctx, c)
}

func (l stateLedger) Release(ctx context.Context, id, receipt string) error {
	led, err := l.get()
	if err != nil {
		return err
	}
	return led.Release(ctx, id, receipt)
}

func (l stateLedger) CheckRelease(ctx context.Context, id, receipt string) (approval.Redemption, error) {
	led, err := l.get()
	if err != nil {
		return approval.Redemption{}, err
	}
	return led.CheckRelease(ctx, id, receipt)
}

func (l stateLedger) Done(ctx context.Context, id string) error {
	led, err := l.get()
	if err != nil {
		return err
	}
	return led.Done(ctx, id)
}

func (l stateLedger) State(ctx context.Context, id string) (approval.LedgerState, error) {
	led, err := l.get()
	if err != nil {
		return "", err
	}
	return led.State(ctx, id)
}
