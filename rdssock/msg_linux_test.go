//go:build linux

package rdssock

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/go-rds/rds/cmsg"
	"github.com/go-rds/rds/internal/rdsabi"
	"golang.org/x/sys/unix"
)

func pair(t *testing.T) (*Conn, *Conn) {
	t.Helper()
	a, b, err := socketpairConns()
	if err != nil {
		t.Fatalf("socketpair: %v", err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// credsCmsg builds an SCM_CREDENTIALS control message, the one control
// message an AF_UNIX socket accepts without passing descriptors.
func credsCmsg() []byte {
	return unix.UnixCredentials(&unix.Ucred{Pid: int32(os.Getpid()), Uid: uint32(os.Getuid()), Gid: uint32(os.Getgid())})
}

func TestReadWriteMsgPayload(t *testing.T) {
	a, b := pair(t)
	want := []byte("hello, rds")
	if n, err := a.WriteMsg(want, nil, noAddr); err != nil || n != len(want) {
		t.Fatalf("WriteMsg = %d, %v; want %d, nil", n, err, len(want))
	}
	buf := make([]byte, 64)
	n, oobn, flags, _, err := b.ReadMsg(buf, nil)
	if err != nil {
		t.Fatalf("ReadMsg: %v", err)
	}
	if !bytes.Equal(buf[:n], want) || oobn != 0 || flags != 0 {
		t.Fatalf("ReadMsg = %q, oobn %d, flags %#x; want %q, 0, 0", buf[:n], oobn, flags, want)
	}
}

// A message of 0 data bytes with control data must travel as exactly that:
// x/sys/unix would add a hidden byte, and mdlayher/socket would report EOF.
func TestZeroByteMessageWithControlData(t *testing.T) {
	a, b := pair(t)
	if err := b.setInt("SO_PASSCRED", unix.SOL_SOCKET, unix.SO_PASSCRED, 1); err != nil {
		t.Fatal(err)
	}
	oob := credsCmsg()
	if n, err := a.WriteMsg(nil, oob, noAddr); err != nil || n != 0 {
		t.Fatalf("WriteMsg(nil, creds) = %d, %v; want 0, nil", n, err)
	}
	buf := make([]byte, 16)
	roob := make([]byte, 128)
	n, oobn, flags, _, err := b.ReadMsg(buf, roob)
	if err != nil {
		t.Fatalf("ReadMsg: %v", err)
	}
	if n != 0 {
		t.Fatalf("received %d data bytes, want 0 (a hidden byte was added)", n)
	}
	msgs, err := unix.ParseSocketControlMessage(roob[:oobn])
	if err != nil || len(msgs) != 1 || msgs[0].Header.Type != unix.SCM_CREDENTIALS {
		t.Fatalf("control data %x (flags %#x) parsed as %v, %v; want one SCM_CREDENTIALS", roob[:oobn], flags, msgs, err)
	}
	cred, err := unix.ParseUnixCredentials(&msgs[0])
	if err != nil || int(cred.Pid) != os.Getpid() {
		t.Fatalf("credentials %+v, %v; want pid %d", cred, err, os.Getpid())
	}
}

func TestReadMsgTruncation(t *testing.T) {
	a, b := pair(t)
	if _, err := a.WriteMsg([]byte("0123456789"), nil, noAddr); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	n, _, flags, _, err := b.ReadMsg(buf, nil)
	if !errors.Is(err, ErrTruncated) {
		t.Fatalf("ReadMsg error = %v; want ErrTruncated", err)
	}
	if n != 4 || string(buf) != "0123" || flags&unix.MSG_TRUNC == 0 {
		t.Fatalf("ReadMsg = %d %q flags %#x; want 4 \"0123\" with MSG_TRUNC", n, buf[:n], flags)
	}
	var op *net.OpError
	if !errors.As(err, &op) || op.Net != "rds" || op.Op != "read" {
		t.Fatalf("error %#v is not a *net.OpError{Net: rds, Op: read}", err)
	}

	// Control data that does not fit is reported too.
	if err := b.setInt("SO_PASSCRED", unix.SOL_SOCKET, unix.SO_PASSCRED, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := a.WriteMsg([]byte("x"), credsCmsg(), noAddr); err != nil {
		t.Fatal(err)
	}
	_, _, flags, _, err = b.ReadMsg(make([]byte, 8), make([]byte, 4))
	if !errors.Is(err, ErrTruncated) || flags&unix.MSG_CTRUNC == 0 {
		t.Fatalf("ReadMsg with small oob: flags %#x, err %v; want MSG_CTRUNC and ErrTruncated", flags, err)
	}
}

func TestReadDeadline(t *testing.T) {
	_, b := pair(t)
	if err := b.SetReadDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, _, _, _, err := b.ReadMsg(make([]byte, 8), nil)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("ReadMsg after deadline: %v; want os.ErrDeadlineExceeded", err)
	}
	if d := time.Since(start); d < 40*time.Millisecond {
		t.Fatalf("ReadMsg returned after %v, before the deadline", d)
	}
}

func TestReadMsgContextCancel(t *testing.T) {
	a, b := pair(t)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(30*time.Millisecond, cancel)
	_, _, _, _, err := b.ReadMsgContext(ctx, make([]byte, 8), nil, 0)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("ReadMsgContext after cancel: %v; want context.Canceled", err)
	}
	// The cancellation must not leave a deadline behind.
	if _, err := a.WriteMsg([]byte("after"), nil, noAddr); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 8)
	n, _, _, _, err := b.ReadMsg(buf, nil)
	if err != nil || string(buf[:n]) != "after" {
		t.Fatalf("ReadMsg after a canceled context = %q, %v; want \"after\", nil", buf[:n], err)
	}
}

func TestReadMsgContextDeadline(t *testing.T) {
	_, b := pair(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	_, _, _, _, err := b.ReadMsgContext(ctx, make([]byte, 8), nil, 0)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ReadMsgContext past deadline: %v; want context.DeadlineExceeded", err)
	}
}

func TestReadMsgDontWait(t *testing.T) {
	_, b := pair(t)
	_, _, _, _, err := b.ReadMsgContext(context.Background(), make([]byte, 8), nil, unix.MSG_DONTWAIT)
	if !errors.Is(err, unix.EAGAIN) {
		t.Fatalf("ReadMsgContext(MSG_DONTWAIT) on an empty socket: %v; want EAGAIN", err)
	}
}

// TestNilContextRefused: every method that takes a context refuses nil
// with an error that names the fix, before touching the socket: a queued
// message stays queued.
func TestNilContextRefused(t *testing.T) {
	a, b := pair(t)
	if _, err := a.WriteMsg([]byte("queued"), nil, noAddr); err != nil {
		t.Fatal(err)
	}
	var nilCtx context.Context
	buf := make([]byte, 16)
	ms := []Message{{Buffer: buf}}
	for name, call := range map[string]func() error{
		"ReadMsgContext": func() error { _, _, _, _, err := b.ReadMsgContext(nilCtx, buf, nil, 0); return err },
		"ReadBatch":      func() error { _, err := b.ReadBatch(nilCtx, ms, 0); return err },
		"WriteMsgContext": func() error {
			_, err := a.WriteMsgContext(nilCtx, []byte("x"), nil, noAddr, 0)
			return err
		},
		"WriteBatch": func() error {
			_, err := a.WriteBatch(nilCtx, []Message{{Buffer: []byte("x")}}, 0)
			return err
		},
		"WarmUp": func() error { return WarmUp(nilCtx, netip.Addr{}, netip.Addr{}, nil) },
	} {
		err := call()
		if !errors.Is(err, errNilContext) || !strings.Contains(err.Error(), "context.Background()") {
			t.Errorf("%s(nil context) = %v; want the nil-context error", name, err)
		}
	}
	n, _, _, _, err := b.ReadMsgContext(context.Background(), buf, nil, unix.MSG_DONTWAIT)
	if err != nil || string(buf[:n]) != "queued" {
		t.Fatalf("after the refused calls: %q, %v; want the one message queued before them", buf[:n], err)
	}
	if _, _, _, _, err := b.ReadMsgContext(context.Background(), buf, nil, unix.MSG_DONTWAIT); !errors.Is(err, unix.EAGAIN) {
		t.Errorf("a refused write sent something: %v", err)
	}
}

func TestCloseUnblocksRead(t *testing.T) {
	_, b := pair(t)
	errc := make(chan error, 1)
	go func() {
		_, _, _, _, err := b.ReadMsg(make([]byte, 8), nil)
		errc <- err
	}()
	time.Sleep(20 * time.Millisecond)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("blocked ReadMsg after Close: %v; want net.ErrClosed", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("ReadMsg still blocked 2s after Close")
	}
	if err := b.Close(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("second Close: %v; want net.ErrClosed", err)
	}
}

// TestAllocReadWriteMsg checks that a send and a receive with control data
// allocate nothing in steady state.
func TestAllocReadWriteMsg(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items; allocation counts are meaningless")
	}
	a, b := pair(t)
	if err := b.setInt("SO_PASSCRED", unix.SOL_SOCKET, unix.SO_PASSCRED, 1); err != nil {
		t.Fatal(err)
	}
	payload := make([]byte, 256)
	oob := credsCmsg()
	buf := make([]byte, 512)
	roob := make([]byte, 128)
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := a.WriteMsg(payload, oob, noAddr); err != nil {
			t.Fatal(err)
		}
		if _, _, _, _, err := b.ReadMsg(buf, roob); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("WriteMsg+ReadMsg allocated %v times per call; want 0", allocs)
	}
}

// TestAllocReadWriteMsgCancelableContext checks that a send and a receive
// with a context that can end allocate nothing when the socket is ready:
// they try the system call before arming the context's deadline.
func TestAllocReadWriteMsgCancelableContext(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items; allocation counts are meaningless")
	}
	a, b := pair(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	payload := make([]byte, 256)
	buf := make([]byte, 512)
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := a.WriteMsgContext(ctx, payload, nil, noAddr, 0); err != nil {
			t.Fatal(err)
		}
		if _, _, _, _, err := b.ReadMsgContext(ctx, buf, nil, 0); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("WriteMsgContext+ReadMsgContext on a ready socket allocated %v times per call; want 0", allocs)
	}
	// A read that must wait still ends with its context.
	short, stop := context.WithTimeout(ctx, 20*time.Millisecond)
	defer stop()
	if _, _, _, _, err := b.ReadMsgContext(short, buf, nil, 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ReadMsgContext on an empty socket: %v, want context.DeadlineExceeded", err)
	}
}

// BenchmarkWriteReadMsgCancelableContext measures a send and a receive with a
// context that can end (the sender's and receiver's usual case) against
// BenchmarkWriteReadMsg.
func BenchmarkWriteReadMsgCancelableContext(b *testing.B) {
	x, y, err := socketpairConns()
	if err != nil {
		b.Fatal(err)
	}
	defer x.Close()
	defer y.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	payload := make([]byte, 64)
	buf := make([]byte, 64)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := x.WriteMsgContext(ctx, payload, nil, noAddr, 0); err != nil {
			b.Fatal(err)
		}
		if _, _, _, _, err := y.ReadMsgContext(ctx, buf, nil, 0); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkWriteReadMsg(b *testing.B) {
	x, y, err := socketpairConns()
	if err != nil {
		b.Fatal(err)
	}
	defer x.Close()
	defer y.Close()
	payload := make([]byte, 64)
	buf := make([]byte, 64)
	b.ReportAllocs()
	b.SetBytes(int64(len(payload)))
	for b.Loop() {
		if _, err := x.WriteMsg(payload, nil, noAddr); err != nil {
			b.Fatal(err)
		}
		if _, _, _, _, err := y.ReadMsg(buf, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWriteReadMsgSyscallBaseline is BenchmarkWriteReadMsg written as
// bare sendmsg/recvmsg system calls on the same socket pair, the floor the
// library's own cost is measured against: compare the two ns/op.
func BenchmarkWriteReadMsgSyscallBaseline(b *testing.B) {
	x, y, err := socketpairConns()
	if err != nil {
		b.Fatal(err)
	}
	defer x.Close()
	defer y.Close()
	fd := func(c *Conn) uintptr {
		var n uintptr
		if err := c.control(func(fd int) error { n = uintptr(fd); return nil }); err != nil {
			b.Fatal(err)
		}
		return n
	}
	xfd, yfd := fd(x), fd(y)
	payload := make([]byte, 64)
	buf := make([]byte, 64)
	var shdr, rhdr unix.Msghdr
	var siov, riov unix.Iovec
	siov.Base, riov.Base = &payload[0], &buf[0]
	siov.SetLen(len(payload))
	riov.SetLen(len(buf))
	shdr.Iov, rhdr.Iov = &siov, &riov
	shdr.SetIovlen(1)
	rhdr.SetIovlen(1)
	b.ReportAllocs()
	b.SetBytes(int64(len(payload)))
	for b.Loop() {
		if _, _, e := unix.RawSyscall(unix.SYS_SENDMSG, xfd, uintptr(unsafe.Pointer(&shdr)), 0); e != 0 {
			b.Fatal(e)
		}
		if _, _, e := unix.RawSyscall(unix.SYS_RECVMSG, yfd, uintptr(unsafe.Pointer(&rhdr)), 0); e != 0 {
			b.Fatal(e)
		}
	}
}

// TestRegistersMemory: only a send whose control data holds an
// RDS_CMSG_RDMA_MAP goes through Syscall; the walk over the headers stops
// at one that does not fit.
func TestRegistersMemory(t *testing.T) {
	build := func(f func(b *cmsg.Builder)) []byte {
		b := cmsg.NewBuilder(nil)
		f(&b)
		out, err := b.Finish()
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	args := func(b *cmsg.Builder) {
		b.RDMAArgs(cmsg.RDMAArgs{Cookie: 1, Remote: cmsg.IOVec{Bytes: 8}, LocalVecAddr: 4096, NumLocal: 1})
	}
	mapping := func(b *cmsg.Builder) { b.RDMAMap(cmsg.MapArgs{Vec: cmsg.IOVec{Addr: 4096, Bytes: 8}}) }
	for _, c := range []struct {
		name string
		ctl  []byte
		want bool
	}{
		{"none", nil, false},
		{"RDMA args", build(args), false},
		{"RDMA dest", build(func(b *cmsg.Builder) { b.RDMADest(7) }), false},
		{"RDMA map", build(mapping), true},
		{"args then map", build(func(b *cmsg.Builder) { args(b); mapping(b) }), true},
		{"map then args", build(func(b *cmsg.Builder) { mapping(b); args(b) }), true},
		{"header cut short", build(mapping)[:unix.SizeofCmsghdr-1], false},
		{"length past the end", func() []byte { b := build(mapping); return b[:len(b)-8] }(), false},
		{"map type at another level", func() []byte {
			b := build(mapping)
			binary.NativeEndian.PutUint32(b[cmsgLevelOff:], unix.SOL_SOCKET)
			return b
		}(), false},
		{"map behind a message without its padding (the kernel steps over a padded length too)", func() []byte {
			b := cmsg.NewBuilder(nil)
			b.Append(unix.SOL_SOCKET, 99, []byte{1, 2, 3})
			out, _ := b.Finish()
			out = out[:cmsg.HeaderLen+3] // the header's length, no padding
			return append(out, build(mapping)...)
		}(), false},
	} {
		var h unix.Msghdr
		if len(c.ctl) > 0 {
			h.Control = &c.ctl[0]
			h.SetControllen(len(c.ctl))
		}
		if got := registersMemory(&h); got != c.want {
			t.Errorf("%s: registersMemory = %v, want %v", c.name, got, c.want)
		}
	}
}

// registersMemory walks the headers itself; it must agree with a walk
// through cmsg.Parser on well-formed and on damaged control data.
func TestRegistersMemoryMatchesParser(t *testing.T) {
	viaParser := func(b []byte) bool {
		p := cmsg.NewParser(b)
		for {
			m, err := p.Next()
			if err != nil {
				return false
			}
			if m.Is(solRDS, rdsabi.CmsgRDMAMap) {
				return true
			}
		}
	}
	b := cmsg.NewBuilder(nil)
	b.RDMAArgs(cmsg.RDMAArgs{Cookie: 1, Remote: cmsg.IOVec{Bytes: 8}, LocalVecAddr: 4096, NumLocal: 1})
	b.RDMADest(7)
	b.RDMAMap(cmsg.MapArgs{Vec: cmsg.IOVec{Addr: 4096, Bytes: 8}})
	full, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var found [2]int // buffers without and with a MAP, as the parser sees them
	for i := 0; i < 20000; i++ {
		ctl := bytes.Clone(full[:rng.IntN(len(full)+1)])
		for k := rng.IntN(3); k > 0 && len(ctl) > 0; k-- {
			ctl[rng.IntN(len(ctl))] = byte(rng.IntN(256)) // damage a byte: lengths, levels, types
		}
		var h unix.Msghdr
		if len(ctl) > 0 {
			h.Control = &ctl[0]
			h.SetControllen(len(ctl))
		}
		if got, want := registersMemory(&h), viaParser(ctl); got != want {
			t.Fatalf("control % x: registersMemory = %v, the parser says %v", ctl, got, want)
		} else if want {
			found[1]++
		} else {
			found[0]++
		}
	}
	if found[0] == 0 || found[1] == 0 {
		t.Fatalf("the buffers tried did not cover both answers: %d without a MAP, %d with", found[0], found[1])
	}
}

// rawResult reads the kernel's [-4095, -1] as an error and everything
// else as a result.
func TestRawResult(t *testing.T) {
	for _, c := range []struct {
		r     uintptr
		want  uintptr
		errno unix.Errno
	}{
		{0, 0, 0},
		{1500, 1500, 0},
		{^uintptr(0), ^uintptr(0), unix.EPERM}, // -1
		{^uintptr(uintptr(unix.EAGAIN) - 1), ^uintptr(0), unix.EAGAIN}, // -EAGAIN
		{^uintptr(4094), ^uintptr(0), 4095},                            // -4095, the lowest error
		{^uintptr(4095), ^uintptr(4095), 0},                            // -4096: a result
	} {
		got, errno := rawResult(c.r)
		if got != c.want || errno != c.errno {
			t.Errorf("rawResult(%#x) = %#x, %v; want %#x, %v", c.r, got, errno, c.want, c.errno)
		}
	}
}

// The hot system calls report the kernel's errors through whichever path
// the architecture uses: an empty socket read without waiting is EAGAIN.
func TestRawSyscallErrno(t *testing.T) {
	a, b, err := socketpairConns()
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	defer b.Close()
	buf := make([]byte, 64)
	if _, _, _, _, err := a.ReadMsgContext(context.Background(), buf, nil, unix.MSG_DONTWAIT); !errors.Is(err, unix.EAGAIN) {
		t.Fatalf("read of an empty socket: %v, want EAGAIN", err)
	}
	if n, err := b.WriteMsg([]byte("hello"), nil, noAddr); n != 5 || err != nil {
		t.Fatalf("write: %d, %v", n, err)
	}
	if n, _, _, _, err := a.ReadMsgContext(context.Background(), buf, nil, unix.MSG_DONTWAIT); n != 5 || err != nil || string(buf[:n]) != "hello" {
		t.Fatalf("read: %d %q, %v", n, buf[:max(n, 0)], err)
	}
}
