package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode"

	"github.com/nats-io/nats.go"
	"google.golang.org/grpc"

	"github.com/yesguard/yesguard/auth"
	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
	"github.com/yesguard/yesguard/server"
)

// defaultNATSURL is where the client commands publish transcripts: the
// embedded NATS server of a guard started with the defaults.
const defaultNATSURL = "nats://" + server.DefaultNATSListen

// clientFlags are the flags of the commands that talk to a running guard
// over its public contract, each also read from the environment variable
// serve reads (YESGUARD_GRPC_ADDR, ...), so that one environment points
// both at the same guard.
type clientFlags struct {
	grpcAddr      string
	natsURL       string
	subjectPrefix string
	json          bool
	// grpcAuth is the gRPC client side: TLS and the bearer token.
	grpcAuth auth.ClientConfig
	// natsAuth is the NATS client side. Its flags read no environment
	// variable: serve's YESGUARD_NATS_* are the guard's own credentials,
	// not the pipeline's.
	natsAuth auth.NATSClientConfig

	envNames []string
}

// clientFlagSet returns the flag set of a client command: --grpc-addr when
// grpc, --nats-url and --subject-prefix when nats, and --json.
func clientFlagSet(name, args, about string, e *env, grpc, nats bool) (*flag.FlagSet, *clientFlags) {
	fs := newFlagSet(name, e)
	c := &clientFlags{}
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: yesguard %s [flags] %s\n\n%s\n\nFlags (also after the arguments):\n", name, args, about)
		fs.PrintDefaults()
	}
	if grpc {
		fs.StringVar(&c.grpcAddr, "grpc-addr", server.DefaultGRPCAddr, "`host:port` of the guard's gRPC server")
		g := &c.grpcAuth
		fs.StringVar(&g.Token, "token", "", "bearer `token` for a guard with --grpc-tokens; prefer YESGUARD_TOKEN, which ps does not show")
		fs.BoolVar(&g.TLS, "tls", false, "use TLS, verifying the guard with the system's roots")
		fs.StringVar(&g.CAFile, "tls-ca", "", "PEM `file` of the CA that verifies the guard (implies --tls)")
		fs.StringVar(&g.CertFile, "tls-cert", "", "client certificate PEM `file`, for a guard with --grpc-client-ca")
		fs.StringVar(&g.KeyFile, "tls-key", "", "client key PEM `file`")
		fs.StringVar(&g.ServerName, "tls-server-name", "", "`name` the guard's certificate must hold, when it is not the address's host")
		c.envNames = append(c.envNames, "grpc-addr", "token", "tls-ca", "tls-cert", "tls-key", "tls-server-name")
	}
	if nats {
		fs.StringVar(&c.natsURL, "nats-url", defaultNATSURL, "NATS server `URL` the guard reads transcripts from")
		fs.StringVar(&c.subjectPrefix, "subject-prefix", server.DefaultSubjectPrefix, "transcripts go to <`prefix`>.<call_id>")
		c.envNames = append(c.envNames, "nats-url", "subject-prefix")
		n := &c.natsAuth
		fs.StringVar(&n.CredsFile, "nats-creds", "", "the pipeline's NATS .creds `file`")
		fs.StringVar(&n.NkeySeedFile, "nats-nkey", "", "`file` holding the pipeline's NATS nkey seed")
		fs.StringVar(&n.TokenFile, "nats-token-file", "", "`file` holding a NATS server token")
		fs.StringVar(&n.User, "nats-user", "", "NATS `user` (the embedded server's pipeline user is \"pipeline\")")
		fs.StringVar(&n.PasswordFile, "nats-password-file", "", "`file` holding the NATS user's password")
		fs.StringVar(&n.TLSCA, "nats-tls-ca", "", "PEM `file` of the CA that verifies the NATS server")
		fs.StringVar(&n.TLSCert, "nats-tls-cert", "", "client certificate PEM `file` for NATS")
		fs.StringVar(&n.TLSKey, "nats-tls-key", "", "client key PEM `file` for NATS")
	}
	fs.BoolVar(&c.json, "json", false, "print one JSON document instead of text")
	bindEnv(fs, c.envNames...)
	return fs, c
}

// parse parses flags anywhere among the arguments (a "--" ends the flags)
// and the environment, and checks the number of positional arguments.
func (c *clientFlags) parse(fs *flag.FlagSet, args []string, e *env, minArgs, maxArgs int) ([]string, error) {
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return nil, flagError{err}
	}
	if err := applyEnv(fs, e.lookupEnv, c.envNames...); err != nil {
		return nil, err
	}
	// serve reads an empty YESGUARD_NATS_URL as "use the embedded server":
	// for a client that is the default address.
	if c.natsURL == "" {
		c.natsURL = defaultNATSURL
	}
	if c.subjectPrefix == "" {
		c.subjectPrefix = server.DefaultSubjectPrefix
	}
	if len(pos) < minArgs || len(pos) > maxArgs {
		return nil, fmt.Errorf("want %s, got %d arguments %q", argCount(minArgs, maxArgs), len(pos), pos)
	}
	return pos, nil
}

func argCount(lo, hi int) string {
	switch {
	case lo == hi && lo == 0:
		return "no arguments"
	case lo == hi:
		return fmt.Sprintf("%d arguments", lo)
	default:
		return fmt.Sprintf("%d to %d arguments", lo, hi)
	}
}

// parseInterleaved parses fs over args, letting flags follow positional
// arguments, as people type them: `say c1 caller "yes" --lang en`.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// flagError is an error the flag package has printed already.
type flagError struct{ error }

func (e flagError) Unwrap() error { return e.error }

// usageError reports a bad command line: exitUsage, unless it was -h.
func usageError(name string, err error, e *env) int {
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if !errors.As(err, new(flagError)) {
		fmt.Fprintf(e.stderr, "yesguard %s: %v\nRun 'yesguard %s -h' for help.\n", name, err, name)
	}
	return exitUsage
}

// dialGuard returns a client of the Guard service at --grpc-addr, with
// the TLS and token flags. It does not connect: the first call does.
func (c *clientFlags) dialGuard() (yesguardv1.GuardClient, *grpc.ClientConn, error) {
	return c.dialGuardWith(c.grpcAuth.Token)
}

// dialGuardWith is dialGuard with another bearer token (a second role's),
// the TLS flags the same.
func (c *clientFlags) dialGuardWith(token string) (yesguardv1.GuardClient, *grpc.ClientConn, error) {
	cfg := c.grpcAuth
	cfg.Token = token
	cfg.Target = dialTarget(c.grpcAddr)
	opts, err := cfg.DialOptions()
	if err != nil {
		return nil, nil, err
	}
	cc, err := grpc.NewClient(cfg.Target, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("grpc-addr %s: %w", cfg.Target, err)
	}
	return yesguardv1.NewGuardClient(cc), cc, nil
}

// connectNATS connects to the guard's transcript feed, with the --nats-*
// credential and TLS flags.
func (c *clientFlags) connectNATS() (*nats.Conn, error) {
	url := c.natsURL
	opts, err := c.natsAuth.Options(url)
	if err != nil {
		return nil, err
	}
	opts = append(opts, nats.Name("yesguard-cli"), nats.Timeout(3*time.Second), nats.MaxReconnects(0))
	nc, err := nats.Connect(url, opts...)
	switch {
	case errors.Is(err, nats.ErrAuthorization):
		// The server answered: it is running, and refused the credential.
		return nil, fmt.Errorf("connect to NATS at %s: %w (the server refused this credential: give the pipeline's with --nats-user and --nats-password-file, --nats-creds, --nats-nkey or --nats-token-file)",
			auth.RedactURLs(url), err)
	case err != nil:
		return nil, fmt.Errorf("connect to NATS at %s: %w (is the guard running? Its embedded server listens on --nats-listen, %s by default)",
			auth.RedactURLs(url), err, server.DefaultNATSListen)
	}
	return nc, nil
}

// checkCallID rejects a call id that cannot be a NATS subject token, as
// the guard does.
func checkCallID(id string) error {
	if id == "" {
		return errors.New("call id: empty")
	}
	if strings.IndexFunc(id, func(r rune) bool {
		return r == '.' || r == '*' || r == '>' || unicode.IsSpace(r) || !unicode.IsPrint(r)
	}) >= 0 {
		return fmt.Errorf("call id %q: may not hold '.', '*', '>', spaces or control characters (it is a NATS subject token)", id)
	}
	return nil
}

// writeJSON writes v as one indented JSON document.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
