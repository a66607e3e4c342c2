package auth

import (
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/nats-io/jwt/v2"
	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// Default subjects.
const (
	DefaultTranscriptPrefix = "yesguard.transcript"
	DefaultDecisionsPrefix  = "yesguard.decisions"
	// DefaultGuardInbox is the guard's own inbox prefix: replies to the
	// guard (JetStream API answers, pushed consumer messages) arrive under
	// it, where no other user may subscribe.
	DefaultGuardInbox = "_INBOX_yesguard"
	// DefaultPipelineInbox is the pipeline's inbox prefix: nats clients'
	// default, so a pipeline needs no setting to get its JetStream publish
	// acks.
	DefaultPipelineInbox = "_INBOX"
	// DefaultCLIInbox is the inbox prefix of the yesguard CLI's reads
	// (replay --call), and of any auditor's client: never the nats
	// clients' default, which the pipeline may read (_INBOX.>).
	DefaultCLIInbox = "_INBOX_yesguard_cli"
	// DefaultPipelineUser is the pipeline's user name.
	DefaultPipelineUser = "pipeline"
)

// PipelinePasswordEnv is the environment variable of the pipeline's
// password. There is no flag for it: a command line is readable by every
// user of the host (ps, /proc).
const PipelinePasswordEnv = "YESGUARD_NATS_PIPELINE_PASSWORD"

// minPasswordBytes is the shortest plaintext pipeline password accepted.
const minPasswordBytes = 16

// anonymousUser is the user a client without credentials becomes on a
// loopback server with no pipeline credential.
const anonymousUser = "anonymous-pipeline"

// Subjects are the NATS subjects the permissions are written for.
type Subjects struct {
	// TranscriptPrefix: transcripts are <TranscriptPrefix>.<call_id>.
	TranscriptPrefix string
	// DecisionsPrefix: the guard's decision records are
	// <DecisionsPrefix>.<call_id>.
	DecisionsPrefix string
	// GuardInbox and PipelineInbox are the two users' inbox prefixes; they
	// must not overlap, so that neither can read the other's replies.
	GuardInbox, PipelineInbox string
}

// withDefaults fills the empty fields.
func (s Subjects) withDefaults() Subjects {
	def := func(v *string, d string) {
		if *v == "" {
			*v = d
		}
	}
	def(&s.TranscriptPrefix, DefaultTranscriptPrefix)
	def(&s.DecisionsPrefix, DefaultDecisionsPrefix)
	def(&s.GuardInbox, DefaultGuardInbox)
	def(&s.PipelineInbox, DefaultPipelineInbox)
	return s
}

// validate refuses prefixes that overlap: one user's subjects must never
// fall under another's wildcard.
func (s Subjects) validate() error {
	named := []struct{ name, v string }{
		{"transcript prefix", s.TranscriptPrefix},
		{"decisions prefix", s.DecisionsPrefix},
		{"guard inbox", s.GuardInbox},
		{"pipeline inbox", s.PipelineInbox},
	}
	var errs []error
	for i, a := range named {
		if a.v == "" || strings.ContainsAny(a.v, "*> \t\r\n") || strings.HasPrefix(a.v, ".") || strings.HasSuffix(a.v, ".") || strings.Contains(a.v, "..") {
			errs = append(errs, fmt.Errorf("%s %q: want dot-separated tokens without wildcards or spaces", a.name, a.v))
			continue
		}
		for _, b := range named[i+1:] {
			if a.v == b.v || strings.HasPrefix(a.v, b.v+".") || strings.HasPrefix(b.v, a.v+".") {
				errs = append(errs, fmt.Errorf("%s %q and %s %q overlap: one's subjects would fall under the other's permissions", a.name, a.v, b.name, b.v))
			}
		}
	}
	return errors.Join(errs...)
}

// PipelinePermissions are the pipeline's: publish transcripts, and
// subscribe to its own inbox only (a JetStream publish's ack arrives
// there). It can read no transcript, no decision and no reply of the
// guard's.
func (s Subjects) PipelinePermissions() *natsserver.Permissions {
	s = s.withDefaults()
	return &natsserver.Permissions{
		Publish: &natsserver.SubjectPermission{Allow: []string{s.TranscriptPrefix + ".>"}},
		Subscribe: &natsserver.SubjectPermission{
			Allow: []string{s.PipelineInbox + ".>"},
			// Redundant with Allow; kept so the intent survives an edit.
			Deny: []string{s.TranscriptPrefix + ".>", s.DecisionsPrefix + ".>", s.GuardInbox + ".>", DefaultCLIInbox + ".>"},
		},
	}
}

// GuardPermissions are the guard's: read transcripts, decision records
// and its own inbox; publish decision records and what JetStream streams,
// consumers and KV buckets need (the JetStream API, acks, flow control
// replies, KV writes). It may not publish transcripts.
func (s Subjects) GuardPermissions() *natsserver.Permissions {
	s = s.withDefaults()
	return &natsserver.Permissions{
		Publish: &natsserver.SubjectPermission{
			Allow: []string{"$JS.API.>", "$JS.ACK.>", "$JS.FC.>", "$KV.>", s.DecisionsPrefix + ".>"},
			Deny:  []string{s.TranscriptPrefix + ".>"},
		},
		Subscribe: &natsserver.SubjectPermission{
			Allow: []string{s.TranscriptPrefix + ".>", s.DecisionsPrefix + ".>", s.GuardInbox + ".>"},
		},
	}
}

// PipelineSource is where the pipeline's credential comes from. At most
// one of a password (file or environment) and an nkey.
type PipelineSource struct {
	// User is the pipeline's user name for a password; default "pipeline".
	User string
	// PasswordFile holds the password (--nats-pipeline-password-file): its
	// first line, or a bcrypt hash of it ($2a$..., as `nats server passwd`
	// makes), so the guard need not hold the password at all.
	PasswordFile string
	// Password is the value of YESGUARD_NATS_PIPELINE_PASSWORD, read from
	// the environment by the caller.
	Password string
	// Nkey is the pipeline's public user nkey (U...,
	// --nats-pipeline-nkey); the pipeline holds the seed.
	Nkey string
}

// EmbeddedNATSConfig builds an EmbeddedNATS.
type EmbeddedNATSConfig struct {
	// Listen is the embedded server's client address (--nats-listen).
	Listen string
	// Subjects are the subjects the permissions cover; empty fields take
	// the defaults.
	Subjects Subjects
	// Pipeline is the pipeline's credential. Empty is allowed only on a
	// loopback Listen: then a client without credentials is the pipeline.
	Pipeline PipelineSource
}

// EmbeddedNATS holds the users of an embedded nats-server: the pipeline,
// the guard, and the guard's gRPC transcript ingestion (a pipeline user
// of the guard's own, publishing what PublishTranscript receives), whose
// nkeys are made here and held only in memory.
type EmbeddedNATS struct {
	subjects     Subjects
	pipelineUser string
	password     string
	nkey         string
	guard        nkeys.KeyPair
	guardPub     string
	ingest       nkeys.KeyPair
	ingestPub    string
}

// NewEmbeddedNATS loads the pipeline's credential, makes the guard's nkey,
// and refuses a non-loopback Listen without a pipeline credential.
func NewEmbeddedNATS(cfg EmbeddedNATSConfig) (*EmbeddedNATS, error) {
	e := &EmbeddedNATS{subjects: cfg.Subjects.withDefaults()}
	if err := e.subjects.validate(); err != nil {
		return nil, fmt.Errorf("embedded NATS subjects: %w", err)
	}
	if err := e.loadPipeline(cfg.Pipeline); err != nil {
		return nil, err
	}
	if err := CheckEmbeddedExposure(cfg.Listen, e.HasPipelineCredential()); err != nil {
		return nil, err
	}
	var err error
	if e.guard, e.guardPub, err = newUserNkey(); err != nil {
		return nil, fmt.Errorf("make the guard's NATS nkey: %w", err)
	}
	if e.ingest, e.ingestPub, err = newUserNkey(); err != nil {
		return nil, fmt.Errorf("make the gRPC ingestion's NATS nkey: %w", err)
	}
	return e, nil
}

func newUserNkey() (nkeys.KeyPair, string, error) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		return nil, "", err
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return nil, "", err
	}
	return kp, pub, nil
}

func (e *EmbeddedNATS) loadPipeline(src PipelineSource) error {
	e.pipelineUser = src.User
	if e.pipelineUser == "" {
		e.pipelineUser = DefaultPipelineUser
	}
	if e.pipelineUser == anonymousUser {
		return fmt.Errorf("pipeline user %q: reserved", anonymousUser)
	}
	given := 0
	for _, s := range []string{src.PasswordFile, src.Password, src.Nkey} {
		if s != "" {
			given++
		}
	}
	if given > 1 {
		return fmt.Errorf("the pipeline's NATS credential: give one of --nats-pipeline-password-file, %s and --nats-pipeline-nkey", PipelinePasswordEnv)
	}
	switch {
	case src.PasswordFile != "":
		b, err := os.ReadFile(src.PasswordFile)
		if err != nil {
			return fmt.Errorf("--nats-pipeline-password-file: %w", err)
		}
		first, _, _ := strings.Cut(string(b), "\n")
		pw, err := checkPassword(strings.TrimRight(first, "\r"))
		if err != nil {
			return fmt.Errorf("--nats-pipeline-password-file %s: %w", src.PasswordFile, err)
		}
		e.password = pw
	case src.Password != "":
		pw, err := checkPassword(src.Password)
		if err != nil {
			return fmt.Errorf("%s: %w", PipelinePasswordEnv, err)
		}
		e.password = pw
	case src.Nkey != "":
		k := strings.TrimSpace(src.Nkey)
		if strings.HasPrefix(k, "S") {
			return errors.New("--nats-pipeline-nkey: this is a seed, the secret half: give the public key (U...) here and keep the seed with the pipeline; treat this seed as exposed")
		}
		if !nkeys.IsValidPublicUserKey(k) {
			return errors.New("--nats-pipeline-nkey: not a public user nkey (want U followed by 55 characters)")
		}
		e.nkey = k
	}
	return nil
}

// checkPassword accepts a bcrypt hash as it is, and a plaintext password
// of at least minPasswordBytes.
func checkPassword(pw string) (string, error) {
	if strings.HasPrefix(pw, "$2") {
		return pw, nil // a bcrypt hash: nats-server compares against it
	}
	if len(pw) < minPasswordBytes {
		return "", fmt.Errorf("the password is shorter than %d bytes; use a long random one (e.g. the output of 'yesguard token')", minPasswordBytes)
	}
	return pw, nil
}

// CheckEmbeddedExposure refuses an embedded server on a non-loopback
// address without a pipeline credential: anyone who could reach it could
// speak for the caller.
func CheckEmbeddedExposure(listen string, hasCredential bool) error {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		host = listen
	}
	if hasCredential || IsLoopbackHost(host) {
		return nil
	}
	return fmt.Errorf("--nats-listen %s is not a loopback address and the embedded NATS server has no pipeline credential, "+
		"so anyone who can reach it could publish a caller's \"yes\": set %s or --nats-pipeline-password-file or --nats-pipeline-nkey, "+
		"or listen on 127.0.0.1", listen, PipelinePasswordEnv)
}

// HasPipelineCredential reports whether the pipeline must authenticate.
// Without one (loopback only), any local client is the pipeline, with
// the pipeline's permissions and no more.
func (e *EmbeddedNATS) HasPipelineCredential() bool { return e.password != "" || e.nkey != "" }

// PipelineUser is the pipeline's user name (or its nkey), for a log line.
func (e *EmbeddedNATS) PipelineUser() string {
	switch {
	case e.nkey != "":
		return e.nkey
	case e.password != "":
		return e.pipelineUser
	}
	return anonymousUser
}

// The embedded server's two accounts (and an external server's, as
// docs/security.md recommends). An account is NATS's unit of isolation:
// a subject, a stream or a KV key in one is unreachable from another
// unless exported.
//
//   - GuardAccount holds the guard's user and all of its JetStream state:
//     the transcript stream, the decision stream, the KV buckets (state,
//     approvals ledger). It exports <TranscriptPrefix>.> as a service to
//     PipelineAccount only.
//   - PipelineAccount holds the pipeline's user and nothing else: no
//     JetStream, no stream, no bucket. It imports that service, so a
//     transcript it publishes lands in the guard's account, where the
//     transcript stream stores it.
//
// Why a service and not a stream export: NATS checks no permission on a
// message's reply subject, and JetStream publishes its PubAck to that
// subject from inside the stream's account. Across a service import the
// server replaces the reply by one of its own making (_R_.…) in the
// exporting account and routes the answer back to the original reply in
// the importer's account. So whatever reply the pipeline names, the ack
// is delivered in PipelineAccount, where there is nothing to write to:
// it cannot land on a decision subject, a $KV key or $JS.API of the
// guard's account. This holds by construction, not by the JetStream API's
// strict decoding of requests.
const (
	GuardAccount    = "YESGUARD"
	PipelineAccount = "YESGUARD_PIPELINE"
)

// accountsConf is the nats-server configuration of the two accounts, with
// users (already written as configuration text) in each.
func (s Subjects) accountsConf(guardUsers, pipelineUsers string) string {
	s = s.withDefaults()
	transcripts := `"` + s.TranscriptPrefix + `.>"`
	var b strings.Builder
	b.WriteString("accounts {\n")
	b.WriteString("  # The guard's account: its streams and KV buckets live here and nowhere\n")
	b.WriteString("  # else. Transcripts enter it only through the service export below.\n")
	b.WriteString("  " + GuardAccount + " {\n    jetstream: enabled\n")
	b.WriteString("    exports: [ { service: " + transcripts + ", accounts: [" + PipelineAccount + "] } ]\n")
	if guardUsers != "" {
		b.WriteString("    users: [\n" + guardUsers + "    ]\n")
	}
	b.WriteString("  }\n")
	b.WriteString("  # The pipeline's account: no JetStream, nothing of the guard's. A\n")
	b.WriteString("  # transcript published here goes to the guard's account as a service\n")
	b.WriteString("  # request, so its JetStream ack comes back here, whatever its reply\n")
	b.WriteString("  # subject names.\n")
	b.WriteString("  " + PipelineAccount + " {\n")
	b.WriteString("    imports: [ { service: { account: " + GuardAccount + ", subject: " + transcripts + " } } ]\n")
	if pipelineUsers != "" {
		b.WriteString("    users: [\n" + pipelineUsers + "    ]\n")
	}
	b.WriteString("  }\n}\n")
	return b.String()
}

// Apply writes the accounts and users into a nats-server's options,
// replacing any there: the pipeline (or, without a credential, the user a
// client with no credentials becomes) in PipelineAccount, and the guard,
// which may connect in-process only, so its nkey is worth nothing over the
// network, in GuardAccount.
func (e *EmbeddedNATS) Apply(o *natsserver.Options) error {
	o.Users, o.Nkeys, o.NoAuthUser, o.Accounts = nil, nil, "", nil
	o.Username, o.Password, o.Authorization = "", "", ""
	if err := o.ProcessConfigString(e.subjects.accountsConf("", "")); err != nil {
		return fmt.Errorf("embedded NATS accounts: %w", err)
	}
	var guardAcc, pipeAcc *natsserver.Account
	for _, a := range o.Accounts {
		switch a.Name {
		case GuardAccount:
			guardAcc = a
		case PipelineAccount:
			pipeAcc = a
		}
	}
	if guardAcc == nil || pipeAcc == nil {
		return errors.New("embedded NATS accounts: the configuration lacks an account")
	}
	pipe := e.subjects.PipelinePermissions()
	switch {
	case e.nkey != "":
		o.Nkeys = append(o.Nkeys, &natsserver.NkeyUser{Nkey: e.nkey, Permissions: pipe, Account: pipeAcc})
	case e.password != "":
		o.Users = append(o.Users, &natsserver.User{Username: e.pipelineUser, Password: e.password, Permissions: pipe, Account: pipeAcc})
	default:
		// nats-server wants a password on every user; nobody is told this
		// one, and NoAuthUser is how a client becomes this user.
		// Plaintext: NoAuthUser logs in with the user's own password,
		// which a bcrypt hash would not match.
		o.Users = append(o.Users, &natsserver.User{Username: anonymousUser, Password: rand.Text(), Permissions: pipe, Account: pipeAcc})
		o.NoAuthUser = anonymousUser
	}
	inProcess := map[string]struct{}{jwt.ConnectionTypeInProcess: {}}
	o.Nkeys = append(o.Nkeys, &natsserver.NkeyUser{
		Nkey:                   e.guardPub,
		Permissions:            e.subjects.GuardPermissions(),
		Account:                guardAcc,
		AllowedConnectionTypes: inProcess,
	})
	// The gRPC ingestion publishes as a pipeline does, from the pipeline's
	// account: the guard's own user still may not publish transcripts.
	o.Nkeys = append(o.Nkeys, &natsserver.NkeyUser{
		Nkey:                   e.ingestPub,
		Permissions:            pipe,
		Account:                pipeAcc,
		AllowedConnectionTypes: inProcess,
	})
	return nil
}

// IngestOptions are the options of the gRPC ingestion's connection: a
// pipeline user of the guard's own, in-process only, with the pipeline's
// inbox prefix (where its JetStream acks arrive).
func (e *EmbeddedNATS) IngestOptions() []nats.Option {
	return []nats.Option{
		nats.Nkey(e.ingestPub, e.ingest.Sign),
		nats.CustomInboxPrefix(e.subjects.PipelineInbox),
	}
}

// GuardOptions are the guard connection's options: its nkey and its
// inbox prefix. The connection must be in-process
// (nats.InProcessServer): the guard's user may not connect otherwise.
func (e *EmbeddedNATS) GuardOptions() []nats.Option {
	return []nats.Option{
		nats.Nkey(e.guardPub, e.guard.Sign),
		nats.CustomInboxPrefix(e.subjects.GuardInbox),
	}
}

// Subjects are the subjects the permissions were written for.
func (e *EmbeddedNATS) Subjects() Subjects { return e.subjects }

// ExternalNATSConfig is the nats-server configuration docs/security.md
// recommends for an external server: the embedded server's two accounts
// (see GuardAccount), the guard's user in the one with JetStream and the
// pipeline's in the other, with the same permissions the embedded server
// gives them. Passwords come from the server's environment
// ($YESGUARD_PIPELINE_PASSWORD, $YESGUARD_GUARD_PASSWORD); nkeys or JWTs
// (an operator setup) carry the same permissions.
func ExternalNATSConfig(s Subjects) string {
	s = s.withDefaults()
	var guard, pipe strings.Builder
	guard.WriteString("      # yesguard: reads transcripts; writes decisions; JetStream and KV,\n")
	guard.WriteString("      # with replies under its own inbox (" + s.GuardInbox + ").\n")
	writeConfUser(&guard, "yesguard", "$YESGUARD_GUARD_PASSWORD", s.GuardPermissions())
	pipe.WriteString("      # The voice pipeline: publishes transcripts; reads only its own inbox\n")
	pipe.WriteString("      # (where JetStream publish acks arrive).\n")
	writeConfUser(&pipe, DefaultPipelineUser, "$YESGUARD_PIPELINE_PASSWORD", s.PipelinePermissions())
	return s.accountsConf(guard.String(), pipe.String())
}

func writeConfUser(b *strings.Builder, user, password string, p *natsserver.Permissions) {
	fmt.Fprintf(b, "      {\n        user: %s\n        password: %s\n        permissions: {\n", user, password)
	for _, dir := range []struct {
		name string
		sp   *natsserver.SubjectPermission
	}{{"publish", p.Publish}, {"subscribe", p.Subscribe}} {
		fmt.Fprintf(b, "          %s: { allow: %s", dir.name, confList(dir.sp.Allow))
		if len(dir.sp.Deny) > 0 {
			fmt.Fprintf(b, ", deny: %s", confList(dir.sp.Deny))
		}
		b.WriteString(" }\n")
	}
	b.WriteString("        }\n      }\n")
}

func confList(subjects []string) string {
	q := make([]string, len(subjects))
	for i, s := range subjects {
		q[i] = `"` + s + `"`
	}
	return "[" + strings.Join(q, ", ") + "]"
}
