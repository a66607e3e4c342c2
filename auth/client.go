package auth

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// ClientConfig is the client side of the gRPC API, as the CLI's flags
// give it.
type ClientConfig struct {
	// Target is the address dialled (host:port), as grpc.NewClient takes it.
	Target string
	// TLS uses TLS with the system's roots; set implicitly by CAFile,
	// CertFile or ServerName (--tls).
	TLS bool
	// CAFile is the PEM bundle that verifies the server (--tls-ca).
	CAFile string
	// CertFile and KeyFile are the client's certificate and key for mutual
	// TLS (--tls-cert, --tls-key).
	CertFile, KeyFile string
	// ServerName overrides the name the server's certificate is checked
	// against (--tls-server-name).
	ServerName string
	// Token is the bearer token sent with every call (--token or
	// YESGUARD_TOKEN).
	Token string
}

// usesTLS reports whether the config asks for TLS.
func (c ClientConfig) usesTLS() bool {
	return c.TLS || c.CAFile != "" || c.CertFile != "" || c.KeyFile != "" || c.ServerName != ""
}

// DialOptions returns the options for grpc.NewClient: TLS transport
// credentials when asked for (else plaintext), and the bearer token. It
// refuses to send a token in plaintext to anything but a loopback address
// (127.0.0.0/8, ::1, localhost or a unix socket), where only this host can
// read it.
func (c ClientConfig) DialOptions() ([]grpc.DialOption, error) {
	var opts []grpc.DialOption
	secure := c.usesTLS()
	if secure {
		cfg, err := c.tlsConfig()
		if err != nil {
			return nil, err
		}
		opts = append(opts, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	} else {
		opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	if c.Token != "" {
		if strings.ContainsFunc(c.Token, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
			return nil, errors.New("--token: holds white space or control characters; give the token alone")
		}
		if !secure && !IsLoopbackTarget(c.Target) {
			return nil, fmt.Errorf("--token: refusing to send the bearer token in plaintext to %s, which is not a loopback address: "+
				"anyone on the path could read and reuse it. Use TLS (--tls-ca FILE, or --tls for the system's roots), or reach the guard on 127.0.0.1",
				c.Target)
		}
		opts = append(opts, grpc.WithPerRPCCredentials(bearer{token: c.Token, plaintextOK: !secure}))
	}
	return opts, nil
}

func (c ClientConfig) tlsConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.ServerName}
	if c.CAFile != "" {
		pool, err := loadCAPool(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("--tls-ca: %w", err)
		}
		cfg.RootCAs = pool
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		return nil, errors.New("--tls-cert and --tls-key: give both, or neither")
	}
	if c.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert %s, --tls-key %s: %w", c.CertFile, c.KeyFile, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// bearer sends "authorization: Bearer <token>" with every call.
type bearer struct {
	token string
	// plaintextOK is set only for a loopback target without TLS.
	plaintextOK bool
}

func (b bearer) GetRequestMetadata(ctx context.Context, _ ...string) (map[string]string, error) {
	if !b.plaintextOK {
		ri, _ := credentials.RequestInfoFromContext(ctx)
		if err := credentials.CheckSecurityLevel(ri.AuthInfo, credentials.PrivacyAndIntegrity); err != nil {
			return nil, fmt.Errorf("refusing to send the bearer token over a connection without TLS: %w", err)
		}
	}
	return map[string]string{"authorization": "Bearer " + b.token}, nil
}

// RequireTransportSecurity makes gRPC itself refuse a plaintext
// connection, except to the loopback target DialOptions allowed.
func (b bearer) RequireTransportSecurity() bool { return !b.plaintextOK }

var _ credentials.PerRPCCredentials = bearer{}

// IsLoopbackTarget reports whether a gRPC target reaches this host only: a
// unix socket, or host:port whose host is localhost or a loopback IP. A
// name is never resolved: only "localhost" counts.
func IsLoopbackTarget(target string) bool {
	if strings.HasPrefix(target, "unix:") || strings.HasPrefix(target, "unix-abstract:") {
		return true
	}
	for _, scheme := range []string{"passthrough:///", "dns:///"} {
		target = strings.TrimPrefix(target, scheme)
	}
	host, _, err := net.SplitHostPort(target)
	if err != nil {
		host = target
	}
	return IsLoopbackHost(host)
}

// IsLoopbackHost reports whether a host (a listen or dial address's host)
// is local only: "localhost" or a loopback IP. An empty or unspecified
// host (0.0.0.0, ::) means every interface and is not.
func IsLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}
