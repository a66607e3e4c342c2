package approval

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// writePEM writes a PKCS#8 PEM key file as openssl genpkey writes it, with
// the given headers.
func writePEM(t *testing.T, path string, priv any, headers map[string]string) {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Headers: headers, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestLoadKeyFile(t *testing.T) {
	dir := t.TempDir()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)

	plain := filepath.Join(dir, "plain.pem")
	writePEM(t, plain, priv, nil)
	k, err := LoadKeyFile(plain)
	if err != nil {
		t.Fatal(err)
	}
	tp, _ := Thumbprint(priv.Public().(ed25519.PublicKey))
	if k.ID != tp || len(tp) != 43 || !k.SignsFrom.IsZero() || !k.Private.Equal(priv) || k.Source != plain {
		t.Errorf("a key file without headers: %+v (thumbprint %s)", k, tp)
	}

	named := filepath.Join(dir, "named.pem")
	writePEM(t, named, priv, map[string]string{HeaderKeyID: "2026-12", HeaderSignsFrom: "2026-12-01T10:00:00+01:00"})
	k, err = LoadKeyFile(named)
	if err != nil {
		t.Fatal(err)
	}
	if k.ID != "2026-12" || !k.SignsFrom.Equal(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)) {
		t.Errorf("a key file with headers: %+v", k)
	}

	// RFC 8037 appendix A.3: the thumbprint of the RFC's Ed25519 key.
	rfcPub := ed25519.PublicKey(mustB64(t, "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"))
	if tp, _ := Thumbprint(rfcPub); tp != "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k" {
		t.Errorf("RFC 8037 A.3 thumbprint = %s", tp)
	}

	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	bad := map[string]func(path string){
		"not PEM": func(p string) { os.WriteFile(p, []byte("hello"), 0o600) },
		"an EC key": func(p string) {
			writePEM(t, p, ec, nil)
		},
		"two blocks": func(p string) {
			writePEM(t, p, priv, nil)
			b, _ := os.ReadFile(p)
			os.WriteFile(p, append(b, b...), 0o600)
		},
		"a public key": func(p string) {
			der, _ := x509.MarshalPKIXPublicKey(priv.Public())
			os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600)
		},
		"an unknown header":   func(p string) { writePEM(t, p, priv, map[string]string{"Signs-from": "2026-12-01T10:00:00Z"}) },
		"a bad signs-from":    func(p string) { writePEM(t, p, priv, map[string]string{HeaderSignsFrom: "tomorrow"}) },
		"a key id with space": func(p string) { writePEM(t, p, priv, map[string]string{HeaderKeyID: "a b"}) },
		"too large":           func(p string) { os.WriteFile(p, make([]byte, maxKeyFileBytes+1), 0o600) },
		"a broken body": func(p string) {
			os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte("nope")}), 0o600)
		},
	}
	for name, write := range bad {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "k.pem")
			write(p)
			if k, err := LoadKeyFile(p); err == nil || !strings.Contains(err.Error(), p) {
				t.Fatalf("LoadKeyFile = %+v, %v; want an error naming the file", k, err)
			}
		})
	}
	if _, err := LoadKeyFile(filepath.Join(dir, "missing.pem")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}
}

func mustB64(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestLoadKeyDir(t *testing.T) {
	dir := t.TempDir()
	_, a, _ := ed25519.GenerateKey(rand.Reader)
	_, b, _ := ed25519.GenerateKey(rand.Reader)
	writePEM(t, filepath.Join(dir, "a.pem"), a, nil)
	writePEM(t, filepath.Join(dir, "b.pem"), b, map[string]string{HeaderSignsFrom: "2026-12-01T10:00:00Z"})
	os.WriteFile(filepath.Join(dir, "README"), []byte("not a key"), 0o644)
	os.WriteFile(filepath.Join(dir, ".hidden.pem"), []byte("not a key"), 0o644)
	os.Mkdir(filepath.Join(dir, "sub.pem"), 0o700)
	// A mounted secret: the file is a link into a hidden directory.
	os.Mkdir(filepath.Join(dir, "..data"), 0o700)
	_, c, _ := ed25519.GenerateKey(rand.Reader)
	writePEM(t, filepath.Join(dir, "..data", "c.pem"), c, map[string]string{HeaderKeyID: "c", HeaderSignsFrom: "2026-12-02T10:00:00Z"})
	if err := os.Symlink(filepath.Join("..data", "c.pem"), filepath.Join(dir, "c.pem")); err != nil {
		t.Fatal(err)
	}

	keys, err := LoadKeyDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 3 {
		t.Fatalf("%d keys, want 3: %+v", len(keys), keys)
	}
	ks, err := NewKeySet(keys, KeySetOptions{Now: func() time.Time { return time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC) }})
	if err != nil {
		t.Fatal(err)
	}
	if cur := ks.Keys()[0]; cur.State != KeySigning || !cur.Public.Equal(b.Public()) {
		t.Errorf("the signing key is %+v, want b.pem's", cur)
	}

	writePEM(t, filepath.Join(dir, "broken.pem"), a, map[string]string{"X": "y"})
	if _, err := LoadKeyDir(dir); err == nil || !strings.Contains(err.Error(), "broken.pem") {
		t.Errorf("a directory with a broken key file: %v, want an error naming it", err)
	}
}

func TestOpenKeyDirGeneratesOnceAndKeeps(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data", "keys")
	first, err := OpenKeyDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != 1 || filepath.Base(first[0].Source) != InitialKeyFile || !first[0].SignsFrom.IsZero() {
		t.Fatalf("first start: %+v", first)
	}
	for path, want := range map[string]os.FileMode{dir: 0o700 | os.ModeDir, first[0].Source: 0o600} {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode() != want {
			t.Errorf("%s: mode %v, want %v", path, st.Mode(), want)
		}
	}
	// A restart reads the same key.
	again, err := OpenKeyDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != 1 || again[0].ID != first[0].ID || !again[0].Private.Equal(first[0].Private) {
		t.Errorf("after a restart: %+v, want the first key", again)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the directory holds %d files, want only the key", len(entries))
	}
}

func TestOpenKeyDirRaceAgreesOnOneKey(t *testing.T) {
	for round := range 20 {
		dir := filepath.Join(t.TempDir(), "keys")
		const replicas = 4
		var wg sync.WaitGroup
		got := make([][]Key, replicas)
		errs := make([]error, replicas)
		start := make(chan struct{})
		for i := range replicas {
			wg.Go(func() {
				<-start
				got[i], errs[i] = OpenKeyDir(dir)
			})
		}
		close(start)
		wg.Wait()
		for i := range replicas {
			if errs[i] != nil {
				t.Fatalf("round %d, replica %d: %v", round, i, errs[i])
			}
			if len(got[i]) != 1 || got[i][0].ID != got[0][0].ID {
				t.Fatalf("round %d: replica %d has %+v, replica 0 %+v", round, i, got[i], got[0])
			}
		}
	}
}

func TestGenerateKeyFileRotates(t *testing.T) {
	dir := t.TempDir()
	if _, err := OpenKeyDir(dir); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 1, 10, 30, 0, 0, time.UTC)
	k, err := GenerateKeyFile(dir, at)
	if err != nil {
		t.Fatal(err)
	}
	if !k.SignsFrom.Equal(at) || filepath.Base(k.Source) != "approval-key-20261201T103000Z.pem" {
		t.Errorf("rotated key: %+v", k)
	}
	if _, err := GenerateKeyFile(dir, at); !errors.Is(err, os.ErrExist) {
		t.Errorf("a second key for the same moment: %v, want ErrExist", err)
	}
	if _, err := GenerateKeyFile(dir, time.Time{}); err == nil {
		t.Error("a rotated key without a signs-from time was written")
	}
	keys, err := LoadKeyDir(dir)
	if err != nil || len(keys) != 2 {
		t.Fatalf("LoadKeyDir: %d keys, %v", len(keys), err)
	}
	clock := &testClock{t: at.Add(-time.Minute)}
	ks, err := NewKeySet(keys, KeySetOptions{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	if cur := ks.Keys()[0]; cur.ID == k.ID {
		t.Error("the new key signs before its signs-from")
	}
	clock.Advance(time.Minute)
	if cur := ks.Keys()[0]; cur.ID != k.ID || cur.State != KeySigning {
		t.Errorf("at its signs-from the signing key is %+v", cur)
	}
}
