package auth

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// NATSClientConfig is how the guard (or the CLI) authenticates to an
// external NATS server, as the --nats-* flags give it. At most one of
// CredsFile, NkeySeedFile, TokenFile and User; secrets come from files,
// never from a command-line value or the URL.
type NATSClientConfig struct {
	// CredsFile is a NATS .creds file: a user JWT and its nkey seed
	// (--nats-creds). It is read again at every reconnect, so a rotated
	// file takes effect without a restart.
	CredsFile string
	// NkeySeedFile holds a user nkey seed, SU... (--nats-nkey).
	NkeySeedFile string
	// TokenFile holds a server token, its first line (--nats-token-file).
	TokenFile string
	// User and PasswordFile are a user name and a file whose first line is
	// its password (--nats-user, --nats-password-file).
	User, PasswordFile string
	// TLSCA is the PEM bundle that verifies the server (--nats-tls-ca).
	TLSCA string
	// TLSCert and TLSKey are the client certificate and key, for a server
	// that verifies clients (--nats-tls-cert, --nats-tls-key).
	TLSCert, TLSKey string
	// InboxPrefix is the connection's inbox prefix (the guard's:
	// DefaultGuardInbox), so that permissions can keep others from its
	// replies. Empty keeps nats.go's default.
	InboxPrefix string
}

// Options checks every file now and returns the nats.go options, or every
// problem at once, each naming its flag. URL is the --nats-url value: a
// credential in it as well as in a flag is refused (which would win is not
// obvious), and it is only ever printed through RedactURLs.
func (c NATSClientConfig) Options(url string) ([]nats.Option, error) {
	var errs []error
	bad := func(flag string, err error) { errs = append(errs, fmt.Errorf("%s: %w", flag, err)) }
	var opts []nats.Option

	var given []string
	for _, f := range []struct{ flag, v string }{
		{"--nats-creds", c.CredsFile}, {"--nats-nkey", c.NkeySeedFile},
		{"--nats-token-file", c.TokenFile}, {"--nats-user", c.User},
	} {
		if f.v != "" {
			given = append(given, f.flag)
		}
	}
	if len(given) > 1 {
		errs = append(errs, fmt.Errorf("%s: give one way to authenticate, not %d", strings.Join(given, ", "), len(given)))
	}
	if len(given) > 0 && URLHasCredentials(url) {
		errs = append(errs, fmt.Errorf("--nats-url %s holds a credential and %s gives another: keep the one in the file, and take it out of the URL (where ps shows it)",
			RedactURLs(url), given[0]))
	}

	if c.CredsFile != "" {
		if err := checkCredsFile(c.CredsFile); err != nil {
			bad("--nats-creds", err)
		} else {
			opts = append(opts, nats.UserCredentials(c.CredsFile))
		}
	}
	if c.NkeySeedFile != "" {
		if opt, err := nats.NkeyOptionFromSeed(c.NkeySeedFile); err != nil {
			bad("--nats-nkey", fmt.Errorf("%s: %w", c.NkeySeedFile, err))
		} else {
			opts = append(opts, opt)
		}
	}
	if c.TokenFile != "" {
		if tok, err := readSecretLine(c.TokenFile); err != nil {
			bad("--nats-token-file", err)
		} else {
			opts = append(opts, nats.Token(tok))
		}
	}
	switch {
	case c.User != "" && c.PasswordFile == "":
		bad("--nats-user", errors.New("needs --nats-password-file"))
	case c.User == "" && c.PasswordFile != "":
		bad("--nats-password-file", errors.New("needs --nats-user"))
	case c.User != "":
		if pw, err := readSecretLine(c.PasswordFile); err != nil {
			bad("--nats-password-file", err)
		} else {
			opts = append(opts, nats.UserInfo(c.User, pw))
		}
	}

	// nats.go reads these files again at each connect; applying them
	// once here reports a bad file now, under its flag.
	if c.TLSCA != "" {
		opts = append(opts, checkedOption(&errs, "--nats-tls-ca", nats.RootCAs(c.TLSCA)))
	}
	switch {
	case (c.TLSCert == "") != (c.TLSKey == ""):
		errs = append(errs, errors.New("--nats-tls-cert and --nats-tls-key: give both, or neither"))
	case c.TLSCert != "":
		opts = append(opts, checkedOption(&errs, "--nats-tls-cert/--nats-tls-key", nats.ClientCert(c.TLSCert, c.TLSKey)))
	}
	if c.InboxPrefix != "" {
		opts = append(opts, nats.CustomInboxPrefix(c.InboxPrefix))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return opts, nil
}

// checkedOption applies opt to scratch options, adding its error (under
// flag) to errs, and returns it for the real connection.
func checkedOption(errs *[]error, flag string, opt nats.Option) nats.Option {
	scratch := nats.GetDefaultOptions()
	if err := opt(&scratch); err != nil {
		*errs = append(*errs, fmt.Errorf("%s: %w", flag, err))
	}
	return opt
}

// checkCredsFile checks that a .creds file holds a user JWT and a seed.
func checkCredsFile(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	// ParseDecoratedJWT returns undecorated input as it is: decoding the
	// claims is what tells a JWT.
	j, err := nkeys.ParseDecoratedJWT(b)
	if err == nil {
		_, err = jwt.DecodeUserClaims(j)
	}
	if err != nil {
		return fmt.Errorf("%s: no user JWT in it: %w", path, err)
	}
	kp, err := nkeys.ParseDecoratedNKey(b)
	if err != nil {
		return fmt.Errorf("%s: no nkey seed in it: %w", path, err)
	}
	kp.Wipe()
	return nil
}

// readSecretLine reads a file's first line, which must not be empty.
func readSecretLine(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	first, _, _ := strings.Cut(string(b), "\n")
	s := strings.TrimSpace(first)
	if s == "" {
		return "", fmt.Errorf("%s: the first line is empty", path)
	}
	return s, nil
}
