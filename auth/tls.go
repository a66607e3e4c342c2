package auth

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// ServerTLSConfig names the files of the gRPC server's TLS.
type ServerTLSConfig struct {
	// CertFile and KeyFile are the server's certificate chain and private
	// key, PEM (--grpc-tls-cert, --grpc-tls-key).
	CertFile, KeyFile string
	// ClientCAFile, when set, turns on mutual TLS: every client must
	// present a certificate this CA bundle (PEM) signed, or the handshake
	// fails (--grpc-client-ca).
	ClientCAFile string
}

// serverTLSState is one consistent load of the files.
type serverTLSState struct {
	cert      *tls.Certificate
	clientCAs *x509.CertPool
}

// ServerTLS serves the certificate and client CAs last loaded. Reload
// swaps both at once for new handshakes; connections already made keep
// the keys they agreed on and are never dropped.
type ServerTLS struct {
	cfg   ServerTLSConfig
	state atomic.Pointer[serverTLSState]
}

// LoadServerTLS reads the files. The certificate must match the key and
// be valid now.
func LoadServerTLS(cfg ServerTLSConfig) (*ServerTLS, error) {
	if cfg.CertFile == "" || cfg.KeyFile == "" {
		return nil, errors.New("--grpc-tls-cert and --grpc-tls-key: give both, or neither")
	}
	s := &ServerTLS{cfg: cfg}
	st, err := loadServerTLS(cfg, time.Now())
	if err != nil {
		return nil, err
	}
	s.state.Store(st)
	return s, nil
}

// Reload reads the files again; on an error it keeps serving what it had.
func (s *ServerTLS) Reload() error {
	st, err := loadServerTLS(s.cfg, time.Now())
	if err != nil {
		return err
	}
	s.state.Store(st)
	return nil
}

// MutualTLS reports whether client certificates are required.
func (s *ServerTLS) MutualTLS() bool { return s.cfg.ClientCAFile != "" }

// NotAfter is when the served certificate expires, for a log line or a
// gauge.
func (s *ServerTLS) NotAfter() time.Time { return s.state.Load().cert.Leaf.NotAfter }

// TLSConfig is the server's tls.Config: TLS 1.2 or later, and with a
// client CA, RequireAndVerifyClientCert. Each handshake reads the state
// in force, so a Reload applies to the next connection.
func (s *ServerTLS) TLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2"},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			st := s.state.Load()
			c := &tls.Config{
				MinVersion:   tls.VersionTLS12,
				NextProtos:   []string{"h2"},
				Certificates: []tls.Certificate{*st.cert},
			}
			if st.clientCAs != nil {
				c.ClientAuth = tls.RequireAndVerifyClientCert
				c.ClientCAs = st.clientCAs
			}
			return c, nil
		},
	}
}

// ServerOption is the grpc.Creds option for grpc.NewServer.
func (s *ServerTLS) ServerOption() grpc.ServerOption {
	return grpc.Creds(credentials.NewTLS(s.TLSConfig()))
}

func loadServerTLS(cfg ServerTLSConfig, now time.Time) (*serverTLSState, error) {
	cert, err := tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("--grpc-tls-cert %s, --grpc-tls-key %s: %w", cfg.CertFile, cfg.KeyFile, err)
	}
	if err := checkValidNow(cert.Leaf, now); err != nil {
		return nil, fmt.Errorf("--grpc-tls-cert %s: %w", cfg.CertFile, err)
	}
	st := &serverTLSState{cert: &cert}
	if cfg.ClientCAFile != "" {
		pool, err := loadCAPool(cfg.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("--grpc-client-ca: %w", err)
		}
		st.clientCAs = pool
	}
	return st, nil
}

// checkValidNow refuses a certificate outside its validity period: every
// client would refuse it too, and an error at start-up or reload says so
// where an operator looks.
func checkValidNow(leaf *x509.Certificate, now time.Time) error {
	switch {
	case leaf == nil:
		return errors.New("no certificate")
	case now.After(leaf.NotAfter):
		return fmt.Errorf("the certificate expired at %s", leaf.NotAfter.UTC().Format(time.RFC3339))
	case now.Before(leaf.NotBefore):
		return fmt.Errorf("the certificate is not valid before %s", leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	return nil
}

// loadCAPool reads a PEM bundle of CA certificates.
func loadCAPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no PEM certificate in it", path)
	}
	return pool, nil
}
