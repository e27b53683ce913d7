//go:build integration

package integration

import (
	"bytes"
	"errors"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-rds/rds/integration/vmtest"
	"github.com/go-rds/rds/rdssock"
)

func readProcInt(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}

// TestIntegrationRowsReadBuffer checks SetReadBuffer against the kernel:
// the value read back is doubled and clamped to net.core.rmem_max, and the
// value set is the receive queue's congestion threshold (RDS marks a port
// congested once more than half of SO_RCVBUF is queued on it), so a sender
// meets ErrCongested after that many bytes, and can send again once the
// receiver has read them.
func TestIntegrationRowsReadBuffer(t *testing.T) {
	vmtest.Require(t)
	rmemMax := readProcInt(t, "/proc/sys/net/core/rmem_max")
	c := listen(t, netip.AddrPortFrom(vmtest.TCPLocal4, port()), nil)
	if err := c.SetReadBuffer(4 * rmemMax); err != nil {
		t.Fatal(err)
	}
	if got, err := c.ReadBuffer(); err != nil || got != 2*rmemMax {
		t.Fatalf("ReadBuffer after SetReadBuffer(4*rmem_max) = %d, %v; want 2*rmem_max = %d", got, err, 2*rmemMax)
	}
	if err := c.SetReadBuffer(1); err != nil {
		t.Fatal(err)
	}
	if got, err := c.ReadBuffer(); err != nil || got <= 2 || got > 16<<10 {
		t.Fatalf("ReadBuffer after SetReadBuffer(1) = %d, %v; want the kernel's minimum (a few KiB)", got, err)
	} else {
		t.Logf("SetReadBuffer(1) reads back %d (the kernel's minimum)", got)
	}

	const msgSize, maxMsgs = 1024, 64
	const threshold = 8 << 10
	a := listen(t, netip.AddrPortFrom(vmtest.TCPLocal4, port()), nil)
	payload := bytes.Repeat([]byte{0x5a}, msgSize)
	// fill sends until the first ErrCongested and returns how many
	// messages the kernel accepted before.
	fill := func(b *rdssock.Conn) (int, bool) {
		for i := range maxMsgs {
			_, err := a.WriteMsg(payload, nil, b.LocalAddrPort())
			if errors.Is(err, rdssock.ErrCongested) {
				return i, true
			}
			if err != nil {
				t.Fatalf("send %d: %v", i, err)
			}
			// Leave time for the receiver's congestion map to come back.
			time.Sleep(10 * time.Millisecond)
		}
		return maxMsgs, false
	}

	// Control: a receiver with the default buffer takes all of them.
	def := listenPeer(t, netip.AddrPortFrom(vmtest.TCPPeer4, port()), nil)
	rb, err := def.ReadBuffer()
	if err != nil {
		t.Fatal(err)
	}
	if rb/2 <= maxMsgs*msgSize {
		t.Fatalf("default SO_RCVBUF %d: the control needs more than %d bytes of room", rb, 2*maxMsgs*msgSize)
	}
	if n, congested := fill(def); congested {
		t.Fatalf("a receiver with the default buffer (%d) was congested after %d messages of %d bytes", rb, n, msgSize)
	}

	small := listenPeer(t, netip.AddrPortFrom(vmtest.TCPPeer4, port()), nil)
	if err := small.SetReadBuffer(threshold); err != nil {
		t.Fatal(err)
	}
	if got, err := small.ReadBuffer(); err != nil || got != 2*threshold {
		t.Fatalf("ReadBuffer = %d, %v; want %d", got, err, 2*threshold)
	}
	n, congested := fill(small)
	t.Logf("SetReadBuffer(%d): congested after %d messages of %d bytes", threshold, n, msgSize)
	if !congested {
		t.Fatalf("no congestion after %d messages of %d bytes to a receiver with SetReadBuffer(%d)", n, msgSize, threshold)
	}
	if n*msgSize <= threshold {
		t.Fatalf("congested after %d bytes, at or below the %d-byte threshold", n*msgSize, threshold)
	}
	for i := range n {
		if got, _ := readMsg(t, small); !bytes.Equal(got, payload) {
			t.Fatalf("message %d differs", i)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := a.WriteMsg(payload, nil, small.LocalAddrPort())
		if err == nil {
			break
		}
		if !errors.Is(err, rdssock.ErrCongested) || time.Now().After(deadline) {
			t.Fatalf("after the receiver drained its queue: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got, _ := readMsg(t, small); !bytes.Equal(got, payload) {
		t.Fatal("message after the congestion cleared differs")
	}
}
