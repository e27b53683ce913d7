//go:build integration && linux

package integration

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/go-rds/rds/barrier"
	"github.com/go-rds/rds/cmsg"
	"github.com/go-rds/rds/integration/vmtest"
	"github.com/go-rds/rds/rdmaops"
	"github.com/go-rds/rds/rdssock"
)

// TestIntegrationRDMACongestion: against a congested destination port,
// Register and Do wait by default, and give up only when they must.
//
//   - With Options.FailFast, Register and Do fail with ErrCongested at once.
//   - Do with no deadline of its own gives up when the tracker times the
//     operation out (Config.Timeout); Register gives up after that long too.
//   - Register with the default tracker waits until the receiver drains its
//     queue, then registers and announces the key: the receiver gets the
//     message with the MR's cookie. A sendmsg the kernel refused for
//     congestion had freed the key it mapped, so the retry is safe.
func TestIntegrationRDMACongestion(t *testing.T) {
	vmtest.Require(t)
	// A receiver that does not read yet, with the smallest receive buffer.
	dst := listen(t, netip.AddrPortFrom(vmtest.IBAddr2, rdmaPort()), &rdssock.Config{ReceiveBuffer: 4096})
	if tr, err := dst.Transport(); err != nil || tr != rdssock.TransportIB {
		t.Fatalf("transport of %v = %v, %v; want IB", dst.LocalAddrPort(), tr, err)
	}
	const timeout = 2 * time.Second
	short := newRDMAEnd(t, vmtest.IBAddr1, nil, &barrier.Config{Timeout: timeout}, nil)
	fast := newRDMAEnd(t, vmtest.IBAddr1, nil, nil, &rdmaops.Options{FailFast: true})
	patient := newRDMAEnd(t, vmtest.IBAddr1, nil, nil, nil)

	// Congest dst's port: send until the kernel refuses.
	payload := make([]byte, 1024)
	queued := 0
	for ; ; queued++ {
		_, err := short.sock.WriteMsg(payload, nil, dst.LocalAddrPort())
		if errors.Is(err, rdssock.ErrCongested) {
			break
		}
		if err != nil {
			t.Fatalf("filling the receiver, message %d: %v", queued, err)
		}
		if queued == 1000 {
			t.Fatal("1000 messages to a receiver with a 4 KiB buffer, and it never became congested")
		}
	}
	if queued == 0 {
		t.Fatal("the receiver was congested before any message")
	}

	region, err := rdmaops.NewRegion(3 * 4096)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { region.Close() })
	span := func(i int) rdmaops.Span { return region.Span(i*4096, 4096) }
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The remote key is never used: no operation gets through while the
	// port stays congested.
	writeOp := func(i int) *rdmaops.Op {
		return &rdmaops.Op{Write: true, Remote: 0x1234, Local: []rdmaops.Span{span(i)}}
	}

	start := time.Now()
	if mr, err := fast.c.Register(ctx, span(0), cmsg.FlagReadWrite, dst.LocalAddrPort(), []byte("fast")); !errors.Is(err, rdssock.ErrCongested) {
		if mr != nil {
			mr.Free()
		}
		t.Fatalf("FailFast Register to a congested port: %v; want ErrCongested", err)
	}
	tok, err := fast.c.Do(ctx, dst.LocalAddrPort(), writeOp(1))
	if !errors.Is(err, rdssock.ErrCongested) || fast.c.Tracker().Status(tok) != barrier.NotSent {
		t.Fatalf("FailFast Do to a congested port: %v, status %v; want ErrCongested, NotSent", err, fast.c.Tracker().Status(tok))
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("FailFast calls took %v; want them to return at once", d)
	}

	// The tracker's timeout bounds the waits of a caller with no deadline.
	bounded := func(what string, f func() error) {
		t.Helper()
		start := time.Now()
		done := make(chan error, 1)
		go func() { done <- f() }()
		select {
		case err := <-done:
			d := time.Since(start)
			if !errors.Is(err, rdssock.ErrCongested) || d < timeout-100*time.Millisecond {
				t.Errorf("%s to a congested port: %v after %v; want ErrCongested after the tracker's %v", what, err, d, timeout)
			}
		case <-time.After(timeout + 20*time.Second):
			t.Fatalf("%s to a congested port with no deadline still waits %v after the tracker's timeout of %v", what, 20*time.Second, timeout)
		}
	}
	bounded("Do", func() error {
		tok, err := short.c.Do(context.Background(), dst.LocalAddrPort(), writeOp(1))
		if s := short.c.Tracker().Status(tok); s != barrier.TimedOut {
			t.Errorf("Do given up on: status %v; want TimedOut (the tracker's timeout ended the wait)", s)
		}
		return err
	})
	bounded("Register", func() error {
		mr, err := short.c.Register(context.Background(), span(2), cmsg.FlagReadWrite, dst.LocalAddrPort(), []byte("short"))
		if mr != nil {
			mr.Free()
		}
		return err
	})

	// The default waits out the congestion.
	type result struct {
		mr  *rdmaops.MR
		err error
	}
	reg := make(chan result, 1)
	go func() {
		mr, err := patient.c.Register(ctx, span(0), cmsg.FlagReadWrite, dst.LocalAddrPort(), []byte("patient"))
		reg <- result{mr, err}
	}()
	select {
	case r := <-reg:
		t.Fatalf("Register to a congested port returned at once: %v; want it to wait", r.err)
	case <-time.After(500 * time.Millisecond):
	}
	dst.SetReadDeadline(time.Now().Add(30 * time.Second))
	buf := make([]byte, 2048)
	oob := make([]byte, 256)
	for i := range queued {
		n, _, _, _, err := dst.ReadMsg(buf, oob)
		if err != nil || n != len(payload) {
			t.Fatalf("queued message %d of %d: %d bytes, %v", i, queued, n, err)
		}
	}
	var r result
	select {
	case r = <-reg:
	case <-time.After(30 * time.Second):
		t.Fatal("Register still waits 30 s after the receiver drained its queue")
	}
	if r.err != nil {
		t.Fatalf("Register once the port drained: %v", r.err)
	}
	defer r.mr.Free()
	// rdmaops reads the registration's message and its announced cookie.
	rc := rdmaops.New(dst, nil, nil)
	t.Cleanup(func() { rc.Close() })
	m, err := rc.ReadMsg(ctx, buf, oob)
	if err != nil || string(buf[:m.N]) != "patient" {
		t.Fatalf("after the queued messages: %q, %v; want the registration's message", buf[:m.N], err)
	}
	if !m.HasDest || m.Dest != r.mr.Cookie() {
		t.Fatalf("the registration's message carried cookie %v (announced: %v); the MR has %v", m.Dest, m.HasDest, r.mr.Cookie())
	}
	t.Logf("%d messages congested the port; Register waited it out", queued)
}
