package server

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gofrs/flock"
)

// The data directory's lock (finding 12 of the red team).
//
// Two embedded servers on one JetStream store both ran (neither
// nats-server nor the guard locks it) and each overwrote the other's
// state. The guard that opens a --data-dir holds an exclusive lock on
// <data-dir>/yesguard.lock (flock: the OS releases it when the process
// ends, even by kill -9) from before the embedded server opens the store
// until after it has shut down. A second guard on the same directory does
// not start: it fails at once, naming the directory and the pid holding it.

// dataDirLockFile is the lock's file in the data directory.
const dataDirLockFile = "yesguard.lock"

// lockDataDir takes the data directory's lock, or fails naming who holds it.
func lockDataDir(dir string) (*flock.Flock, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("data_dir: %w", err)
	}
	path := filepath.Join(dir, dataDirLockFile)
	l := flock.New(path)
	ok, err := l.TryLock()
	if err != nil {
		return nil, fmt.Errorf("data_dir: lock %s: %w", path, err)
	}
	if !ok {
		holder := "another process"
		if b, err := os.ReadFile(path); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				holder = fmt.Sprintf("another yesguard (pid %d)", pid)
			}
		}
		return nil, fmt.Errorf("data_dir: %s is in use by %s; give each guard its own --data-dir, or connect them to one NATS with --nats-url", dir, holder)
	}
	// Who holds it, for the message of the next one (the lock is on the
	// open file, not its contents).
	if err := os.WriteFile(path, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600); err != nil {
		_ = l.Unlock()
		return nil, fmt.Errorf("data_dir: %w", err)
	}
	return l, nil
}
