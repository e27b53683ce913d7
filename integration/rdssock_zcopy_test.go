//go:build integration

package integration

import (
	"bytes"
	"context"
	"io"
	"net/netip"
	"testing"
	"time"

	"github.com/go-rds/rds/cmsg"
	"github.com/go-rds/rds/integration/vmtest"
	"github.com/go-rds/rds/rdssock"
	"golang.org/x/sys/unix"
)

// sendZeroCopy sends payload from a to dst with MSG_ZEROCOPY and cookie.
func sendZeroCopy(t *testing.T, a *rdssock.Conn, payload []byte, dst netip.AddrPort, cookie uint32) {
	t.Helper()
	b := cmsg.NewBuilder(make([]byte, 0, cmsg.ZeroCopyCookieSpace))
	b.ZeroCopyCookie(cookie)
	oob, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.WriteMsgContext(context.Background(), payload, oob, dst, unix.MSG_ZEROCOPY); err != nil {
		t.Fatalf("MSG_ZEROCOPY send of cookie %d: %v", cookie, err)
	}
}

// zeroCopyCookies returns the cookies of every RDS_CMSG_ZCOPY_COMPLETION
// in oob, one slice per control message.
func zeroCopyCookies(t *testing.T, oob []byte) [][]uint32 {
	t.Helper()
	var out [][]uint32
	p := cmsg.NewParser(oob)
	for {
		m, err := p.Next()
		if err == io.EOF {
			return out
		} else if err != nil {
			t.Fatal(err)
		}
		if z, err := m.ZeroCopyCompletion(); err == nil {
			out = append(out, append([]uint32(nil), z.List()...))
		}
	}
}

// pollIn waits until c's descriptor is readable.
func pollIn(t *testing.T, c *rdssock.Conn, limit time.Duration) {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var perr error
	if err := rc.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, perr = unix.Poll(fds, int(limit/time.Millisecond))
	}); err != nil {
		t.Fatal(err)
	}
	if perr != nil || n != 1 {
		t.Fatalf("poll for POLLIN on %v: %d, %v after %v", c.LocalAddr(), n, perr, limit)
	}
}

// TestIntegrationRowsZeroCopyOnData: zero-copy completions pending on a
// socket ride on the next data message it reads (net/rds/recv.c attaches
// one RDS_CMSG_ZCOPY_COMPLETION to a data receive too); the rest come as
// 0-byte notices. Over IPv6 between the namespaces, with more sends than
// one completion message holds, every cookie comes back exactly once and
// the kernel coalesces some.
func TestIntegrationRowsZeroCopyOnData(t *testing.T) {
	vmtest.Require(t)
	a := listen(t, netip.AddrPortFrom(vmtest.TCPLocal6, port()), &rdssock.Config{ZeroCopy: true})
	b := listenPeer(t, netip.AddrPortFrom(vmtest.TCPPeer6, port()), nil)
	const msgs = 20 // more than two completion messages' worth
	payload := bytes.Repeat([]byte{0x6b}, 2048)
	for i := range msgs {
		sendZeroCopy(t, a, payload, b.LocalAddrPort(), uint32(500+i))
	}
	for range msgs {
		if got, _ := readMsg(t, b); !bytes.Equal(got, payload) {
			t.Fatal("payload differs")
		}
	}
	// Nothing was sent to a, so POLLIN means completions are pending.
	pollIn(t, a, recvWait)
	reply := []byte("data that carries a completion")
	if _, err := b.WriteMsg(reply, nil, a.LocalAddrPort()); err != nil {
		t.Fatal(err)
	}
	// Wait until the reply is queued on a (RDS6_INFO_RECV_MESSAGES).
	for deadline := time.Now().Add(recvWait); ; {
		qs, err := a.Messages(rdssock.ReceiveQueue)
		if err != nil {
			t.Fatal(err)
		}
		queued := false
		for _, q := range qs {
			if q.Len == uint32(len(reply)) && (q.Local.Port() == a.LocalAddrPort().Port() || q.Remote.Port() == a.LocalAddrPort().Port()) {
				queued = true
			}
		}
		if queued {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the reply never showed in RDS6_INFO_RECV_MESSAGES: %+v", qs)
		}
		time.Sleep(5 * time.Millisecond)
	}

	seen := map[uint32]int{}
	var sizes []int
	buf, oob := make([]byte, 256), make([]byte, cmsg.MaxReceiveSpace)
	n, oobn, _, from, err := a.ReadMsg(buf, oob)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf[:n], reply) || from != b.LocalAddrPort() {
		t.Fatalf("first read: %q from %v; want %q from %v", buf[:n], from, reply, b.LocalAddrPort())
	}
	onData := zeroCopyCookies(t, oob[:oobn])
	if len(onData) != 1 || len(onData[0]) == 0 {
		t.Fatalf("the data message carried completions %v; want one RDS_CMSG_ZCOPY_COMPLETION", onData)
	}
	t.Logf("data message carried cookies %v", onData[0])
	for _, c := range onData[0] {
		seen[c]++
	}
	sizes = append(sizes, len(onData[0]))
	for total := len(onData[0]); total < msgs; {
		n, oobn, _, _, err := a.ReadMsg(buf, oob)
		if err != nil {
			t.Fatalf("after %d cookies: %v", total, err)
		}
		if n != 0 {
			t.Fatalf("unexpected %d-byte message", n)
		}
		zs := zeroCopyCookies(t, oob[:oobn])
		if len(zs) != 1 {
			t.Fatalf("0-byte notice with %d completion messages", len(zs))
		}
		for _, c := range zs[0] {
			seen[c]++
		}
		sizes = append(sizes, len(zs[0]))
		total += len(zs[0])
	}
	t.Logf("%d completion messages carrying %v cookies", len(sizes), sizes)
	for i := range msgs {
		if seen[uint32(500+i)] != 1 {
			t.Errorf("cookie %d came back %d times", 500+i, seen[uint32(500+i)])
		}
	}
	if len(seen) != msgs {
		t.Errorf("%d distinct cookies, want %d: %v", len(seen), msgs, seen)
	}
	coalesced := false
	for _, s := range sizes {
		if s < 1 || s > cmsg.MaxZeroCopyCookies {
			t.Errorf("completion with %d cookies; want 1..%d", s, cmsg.MaxZeroCopyCookies)
		}
		coalesced = coalesced || s > 1
	}
	if !coalesced {
		t.Errorf("no completion carried more than one cookie: %v", sizes)
	}
	// Nothing more is pending.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if n, oobn, _, _, err := a.ReadMsgContext(ctx, buf, oob, 0); err == nil {
		t.Fatalf("extra message after all cookies: %d bytes, control %v", n, zeroCopyCookies(t, oob[:oobn]))
	}
}
