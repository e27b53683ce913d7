package rdsinfo

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/go-rds/rds/internal/rdsabi"
)

// retries bounds how often Read grows its buffer: a table can grow between
// the kernel's answer "ENOSPC, need N bytes" and the next call.
const retries = 8

// Read reads table t from an RDS socket with the kernel's size protocol: a
// buffer too small gives ENOSPC and the needed length, so Read grows the
// buffer and asks again. It returns the table's bytes (in buf when buf was
// large enough) and the size of one row, which differs between kernel
// versions. The socket need not be bound. A failed getsockopt is an
// *os.SyscallError naming the table; Hint explains the common ones.
func Read(rc syscall.RawConn, t Table, buf []byte) (data []byte, each int, err error) {
	if t < first || t > last {
		return nil, 0, fmt.Errorf("rds: unknown info table %d", int(t))
	}
	if cap(buf) == 0 {
		buf = make([]byte, 4096)
	}
	buf = buf[:cap(buf)]
	for range retries {
		var (
			optlen = uint32(len(buf))
			n      uintptr
			errno  unix.Errno
		)
		err := rc.Control(func(fd uintptr) {
			n, _, errno = unix.Syscall6(unix.SYS_GETSOCKOPT, fd, rdsabi.SOL, uintptr(t),
				uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&optlen)), 0)
		})
		switch {
		case err != nil:
			return nil, 0, err
		case errno == unix.ENOSPC:
			buf = make([]byte, int(optlen)+int(optlen)/4+256)
			continue
		case errno != 0:
			return nil, 0, os.NewSyscallError("getsockopt("+t.String()+")", errno)
		}
		return buf[:optlen], int(n), nil
	}
	return nil, 0, fmt.Errorf("rds: info table %v kept growing; gave up after %d tries", t, retries)
}

// Hint explains a failed Read of table t, or returns "".
func Hint(t Table, err error) string {
	if !errors.Is(err, unix.ENOPROTOOPT) {
		return ""
	}
	switch t {
	case IBConnections, IBConnections6:
		return "the InfiniBand table needs the rds_rdma module: modprobe rds_rdma"
	case TCPSockets, TCPSockets6:
		return "the TCP table needs the rds_tcp module: modprobe rds_tcp"
	case ConnectionStats, IWARPConnections:
		return "this kernel provides no " + t.String() + " table"
	}
	return ""
}
