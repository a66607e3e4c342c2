//go:build !unix

package server

import "errors"

func raiseFDLimit() (soft, hard uint64, err error) {
	return 0, 0, errors.New("no RLIMIT_NOFILE on this system")
}
