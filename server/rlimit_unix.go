//go:build unix

package server

import (
	"fmt"
	"syscall"
)

// raiseFDLimit raises the soft RLIMIT_NOFILE to the hard one, as
// nats-server does, and returns both.
func raiseFDLimit() (soft, hard uint64, err error) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, 0, fmt.Errorf("getrlimit: %w", err)
	}
	if l.Cur < l.Max {
		raised := syscall.Rlimit{Cur: l.Max, Max: l.Max}
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised) == nil {
			l = raised
		}
	}
	return uint64(l.Cur), uint64(l.Max), nil
}
