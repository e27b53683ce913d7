//go:build linux

package rdssock

import (
	"net/netip"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// socketpairConns returns two Conns over an AF_UNIX SOCK_SEQPACKET pair.
// The message path (sendmsg/recvmsg with our own msghdr) is the same as for
// AF_RDS, so hosts without RDS can test it.
func socketpairConns() (*Conn, *Conn, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	wrap := func(fd int) (*Conn, error) { return newConn(newKfd(fd)), nil }
	a, err := wrap(fds[0])
	if err != nil {
		return nil, nil, err
	}
	b, err := wrap(fds[1])
	return a, b, err
}

// noAddr sends to the connected peer of a socketpair.
var noAddr netip.AddrPort

// setGOMAXPROCS sets GOMAXPROCS and the wait path's copy of it at once (the
// copy otherwise follows within procsEvery waits) and returns the function
// that restores both.
func setGOMAXPROCS(n int) (restore func()) {
	old := runtime.GOMAXPROCS(n)
	procsSeen.Store(int32(n))
	return func() {
		runtime.GOMAXPROCS(old)
		procsSeen.Store(int32(old))
	}
}

// setSleepLimits sets how long a read sleeps in ppoll before it parks
// (kernelSlice) and how long reads sleep before one parks (parkSleep and
// parkWall); the caller runs the returned function to restore them, with
// no read waiting.
func setSleepLimits(d time.Duration) (restore func()) {
	slice, sleep, wall := kernelSlice, parkSleep, parkWall
	kernelSlice, parkSleep, parkWall = d, d, d
	return func() { kernelSlice, parkSleep, parkWall = slice, sleep, wall }
}

// waitFor polls cond until it holds, failing t after 5s without what.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("5s without %s", what)
		}
		time.Sleep(100 * time.Microsecond)
	}
}
