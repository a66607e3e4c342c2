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
	"google.golang.org/grpc/credentials/insecure"

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
		c.envNames = append(c.envNames, "grpc-addr")
	}
	if nats {
		fs.StringVar(&c.natsURL, "nats-url", defaultNATSURL, "NATS server `URL` the guard reads transcripts from")
		fs.StringVar(&c.subjectPrefix, "subject-prefix", server.DefaultSubjectPrefix, "transcripts go to <`prefix`>.<call_id>")
		c.envNames = append(c.envNames, "nats-url", "subject-prefix")
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

// dialGuard returns a client of the Guard service at addr. It does not
// connect: the first call does.
func dialGuard(addr string) (yesguardv1.GuardClient, *grpc.ClientConn, error) {
	target := dialTarget(addr)
	cc, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, nil, fmt.Errorf("grpc-addr %s: %w", target, err)
	}
	return yesguardv1.NewGuardClient(cc), cc, nil
}

// connectNATS connects to the guard's transcript feed.
func connectNATS(url string) (*nats.Conn, error) {
	nc, err := nats.Connect(url, nats.Name("yesguard-cli"), nats.Timeout(3*time.Second), nats.MaxReconnects(0))
	if err != nil {
		return nil, fmt.Errorf("connect to NATS at %s: %w (is the guard running? Its embedded server listens on --nats-listen, %s by default)",
			server.RedactURLs(url), err, server.DefaultNATSListen)
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
