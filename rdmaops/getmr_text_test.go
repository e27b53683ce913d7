//go:build linux

package rdmaops

import (
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/go-rds/rds/rdssock"
)

// The refusal texts name the cause: the transport when the socket is not
// on RDS/IB, binding when it is unbound, FRWR otherwise.
func TestOptErrnoText(t *testing.T) {
	for _, tc := range []struct {
		e            optErrno
		says, notSay string
	}{
		{optErrno{errno: syscall.EOPNOTSUPP, transport: rdssock.TransportTCP}, "this socket uses tcp", "FRWR"},
		{optErrno{errno: syscall.EOPNOTSUPP}, "FRWR", "this socket uses"},
		{optErrno{errno: syscall.ENOTCONN}, "not bound", "FRWR"},
	} {
		msg := tc.e.Error()
		if !strings.Contains(msg, tc.says) || strings.Contains(msg, tc.notSay) {
			t.Errorf("%+v: %q; want it to say %q and not %q", tc.e, msg, tc.says, tc.notSay)
		}
		if !errors.Is(tc.e, tc.e.errno) {
			t.Errorf("%+v does not match its errno", tc.e)
		}
		if got := errors.Is(tc.e, rdssock.ErrNotSupported); got != (tc.e.errno == syscall.EOPNOTSUPP) {
			t.Errorf("%+v: errors.Is ErrNotSupported = %v", tc.e, got)
		}
	}
}
