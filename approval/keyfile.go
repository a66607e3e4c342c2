package approval

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Key file headers: optional lines between the PEM BEGIN line and the
// base64 body.
const (
	// HeaderKeyID names the key ("Key-Id: 2026-12"); without it the key id
	// is the key's RFC 7638 thumbprint.
	HeaderKeyID = "Key-Id"
	// HeaderSignsFrom is when the key starts signing, RFC 3339
	// ("Signs-From: 2026-12-01T10:00:00Z"); without it, from the start.
	HeaderSignsFrom = "Signs-From"
)

// InitialKeyFile is the name of the key OpenKeyDir generates in an empty
// directory. It is fixed so that replicas starting together on one shared
// directory agree on a single key: the first to create it wins and the
// others read it.
const InitialKeyFile = "approval-key.pem"

// maxKeyFileBytes bounds a key file: an Ed25519 PKCS#8 PEM is about 120
// bytes.
const maxKeyFileBytes = 16 << 10

// LoadKeyFile reads one key: a PEM "PRIVATE KEY" block holding an Ed25519
// key in PKCS#8 (what `openssl genpkey -algorithm ed25519` writes), with
// the optional Key-Id and Signs-From headers. Anything else in the file
// (another block, an unknown header, trailing text) is an error naming the
// file, never skipped.
func LoadKeyFile(path string) (Key, error) {
	f, err := os.Open(path)
	if err != nil {
		return Key{}, fmt.Errorf("approval key: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxKeyFileBytes+1))
	if err != nil {
		return Key{}, fmt.Errorf("approval key %s: %w", path, err)
	}
	if len(data) > maxKeyFileBytes {
		return Key{}, fmt.Errorf("approval key %s: larger than %d bytes", path, maxKeyFileBytes)
	}
	k, err := parseKeyFile(data)
	if err != nil {
		return Key{}, fmt.Errorf("approval key %s: %w", path, err)
	}
	k.Source = path
	return k, nil
}

func parseKeyFile(data []byte) (Key, error) {
	block, rest := pem.Decode(data)
	if block == nil {
		return Key{}, errors.New("no PEM block")
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		return Key{}, errors.New("more than one PEM block, or text after it: one key per file")
	}
	if block.Type != "PRIVATE KEY" {
		return Key{}, fmt.Errorf("a %q block, want \"PRIVATE KEY\" (PKCS#8)", block.Type)
	}
	parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return Key{}, fmt.Errorf("PKCS#8: %w", err)
	}
	priv, ok := parsed.(ed25519.PrivateKey)
	if !ok {
		return Key{}, fmt.Errorf("a %T, want an Ed25519 key", parsed)
	}
	k := Key{Private: priv}
	for name, v := range block.Headers {
		switch name {
		case HeaderKeyID:
			k.ID = v
		case HeaderSignsFrom:
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				return Key{}, fmt.Errorf("%s: %w", HeaderSignsFrom, err)
			}
			k.SignsFrom = t.UTC()
		default:
			return Key{}, fmt.Errorf("unknown header %q (want %s or %s)", name, HeaderKeyID, HeaderSignsFrom)
		}
	}
	if k.ID == "" {
		tp, err := Thumbprint(priv.Public().(ed25519.PublicKey))
		if err != nil {
			return Key{}, err
		}
		k.ID = tp
	}
	if err := checkKeyID(k.ID); err != nil {
		return Key{}, fmt.Errorf("%s: %w", HeaderKeyID, err)
	}
	return k, nil
}

// LoadKeyDir reads every *.pem file of dir (following symbolic links, as
// a mounted Kubernetes secret needs; names starting with "." are skipped)
// with LoadKeyFile. A directory without key files gives no keys and no
// error.
func LoadKeyDir(dir string) ([]Key, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("approval keys: %w", err)
	}
	var keys []Key
	var errs []error
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") || filepath.Ext(name) != ".pem" {
			continue
		}
		path := filepath.Join(dir, name)
		if st, err := os.Stat(path); err != nil || st.IsDir() {
			continue
		}
		k, err := LoadKeyFile(path)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		keys = append(keys, k)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return keys, nil
}

// OpenKeyDir is the single-binary default: it reads the keys of dir (the
// data directory's key folder), and when there are none it creates dir
// (0700) and generates InitialKeyFile (0600) in it, so the guard keeps its
// key across restarts and replicas sharing dir share it.
func OpenKeyDir(dir string) ([]Key, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("approval keys: %w", err)
	}
	keys, err := LoadKeyDir(dir)
	if err != nil || len(keys) > 0 {
		return keys, err
	}
	if _, err := writeKeyFile(dir, InitialKeyFile, time.Time{}); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, err
	}
	// Whoever created the file, this replica or one racing it, the
	// directory now holds it.
	return LoadKeyDir(dir)
}

// GenerateKeyFile writes a new key into dir that starts signing at
// signsFrom: the first step of a rotation (docs/approvals.md). The file is
// named after signsFrom and never replaces an existing one.
func GenerateKeyFile(dir string, signsFrom time.Time) (Key, error) {
	if signsFrom.IsZero() {
		return Key{}, errors.New("approval keys: a rotated key needs a signs-from time")
	}
	name := "approval-key-" + signsFrom.UTC().Format("20060102T150405Z") + ".pem"
	return writeKeyFile(dir, name, signsFrom.UTC().Truncate(time.Second))
}

// writeKeyFile generates a key and publishes it as dir/name atomically and
// exclusively: it is written and synced under a temporary name (0600), then
// hard-linked to its name, which fails with fs.ErrExist when the name is
// taken. A reader never sees a partial file.
func writeKeyFile(dir, name string, signsFrom time.Time) (Key, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return Key{}, fmt.Errorf("approval keys: generate: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return Key{}, fmt.Errorf("approval keys: %w", err)
	}
	block := &pem.Block{Type: "PRIVATE KEY", Bytes: der}
	if !signsFrom.IsZero() {
		block.Headers = map[string]string{HeaderSignsFrom: signsFrom.Format(time.RFC3339)}
	}
	tmp, err := os.CreateTemp(dir, ".approval-key-*.tmp")
	if err != nil {
		return Key{}, fmt.Errorf("approval keys: %w", err)
	}
	defer os.Remove(tmp.Name())
	err = tmp.Chmod(0o600)
	if err == nil {
		err = pem.Encode(tmp, block)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Key{}, fmt.Errorf("approval keys: write: %w", err)
	}
	path := filepath.Join(dir, name)
	if err := os.Link(tmp.Name(), path); err != nil {
		return Key{}, fmt.Errorf("approval keys: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync() // the new name survives a crash; best effort
		d.Close()
	}
	return LoadKeyFile(path)
}
