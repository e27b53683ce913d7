package rdssock

import (
	"errors"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
)

func TestErrorMapping(t *testing.T) {
	tests := []struct {
		syscall  string
		errno    syscall.Errno
		sentinel error // nil: none applies
		advice   string
	}{
		{"socket", syscall.EAFNOSUPPORT, ErrUnavailable, "modprobe rds_tcp"},
		{"sendmsg", syscall.ENOBUFS, ErrCongested, "congest"},
		{"sendmmsg", syscall.ENOBUFS, ErrCongested, "congest"},
		{"sendmsg", syscall.EMSGSIZE, ErrMessageTooLarge, "half"},
		{"bind", syscall.ENOPROTOOPT, ErrTransportUnavailable, "rds_rdma"},
		{"setsockopt(SO_RDS_TRANSPORT)", syscall.ENOPROTOOPT, ErrTransportUnavailable, "load"},
		{"sendmsg", syscall.EOPNOTSUPP, ErrNotSupported, "transport"},
		{"setsockopt(RDS_GET_MR)", syscall.EOPNOTSUPP, ErrNotSupported, "transport"},
		// The same errnos from other calls mean something else.
		{"bind", syscall.EAFNOSUPPORT, nil, ""},
		{"recvmsg", syscall.ENOBUFS, nil, ""},
		{"getsockopt(RDS_RECVERR)", syscall.ENOPROTOOPT, nil, ""},
		{"recvmsg", syscall.EAGAIN, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.syscall+"/"+tt.errno.Error(), func(t *testing.T) {
			err := opError("op", nil, nil, wrapSyscall(tt.syscall, tt.errno, ""))
			var oe *net.OpError
			if !errors.As(err, &oe) || oe.Net != "rds" {
				t.Fatalf("%v is not a *net.OpError with Net rds", err)
			}
			var se *os.SyscallError
			if !errors.As(err, &se) || se.Syscall != tt.syscall {
				t.Fatalf("%v does not wrap an *os.SyscallError for %s", err, tt.syscall)
			}
			if !errors.Is(err, tt.errno) {
				t.Errorf("errors.Is(%v, %v) = false", err, tt.errno)
			}
			for _, s := range []error{ErrUnavailable, ErrCongested, ErrMessageTooLarge, ErrTransportUnavailable, ErrNotSupported} {
				if got, want := errors.Is(err, s), s == tt.sentinel; got != want {
					t.Errorf("errors.Is(%v, %q) = %v, want %v", err, s, got, want)
				}
			}
			if tt.advice != "" && !strings.Contains(err.Error(), tt.advice) {
				t.Errorf("error text %q does not contain the advice %q", err, tt.advice)
			}
		})
	}
}

func TestErrorDetailReplacesAdvice(t *testing.T) {
	err := wrapSyscall("sendmsg", syscall.EMSGSIZE, tooLargeDetail(300000, 212992))
	if !errors.Is(err, ErrMessageTooLarge) {
		t.Fatalf("%v does not match ErrMessageTooLarge", err)
	}
	for _, want := range []string{"300000 bytes", "106496", "Config.SendBuffer"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
}

func TestOpErrorClosed(t *testing.T) {
	err := opError("read", nil, nil, os.ErrClosed)
	if !errors.Is(err, net.ErrClosed) {
		t.Fatalf("%v does not match net.ErrClosed", err)
	}
}
