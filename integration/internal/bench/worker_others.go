//go:build !linux

package bench

import (
	"errors"
	"io"
	"runtime"
)

// Roles lists the worker roles, the same in Go and in the C baseline.
var Roles = []string{"recv", "send", "echo", "ping", "rdma-target", "rdma-init"}

// Worker fails: the Go workers need Linux.
func Worker(role string, args []string, out io.Writer) error {
	return errors.New("bench: the workers need Linux, not " + runtime.GOOS + "/" + runtime.GOARCH)
}
