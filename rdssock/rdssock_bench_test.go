//go:build linux

package rdssock

import (
	"context"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The benchmarks in this file measure the send and receive paths with
// control messages, in batches, and the cost of a round trip through the
// runtime poller against blocking system calls. They run over an AF_UNIX
// SOCK_SEQPACKET pair (socketpairConns), whose message path is the one
// used for AF_RDS.

// credPair returns a socketpair whose receiving end gets an
// SCM_CREDENTIALS control message with every message.
func credPair(b *testing.B) (*Conn, *Conn) {
	b.Helper()
	x, y, err := socketpairConns()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { x.Close(); y.Close() })
	if err := y.setInt("SO_PASSCRED", unix.SOL_SOCKET, unix.SO_PASSCRED, 1); err != nil {
		b.Fatal(err)
	}
	return x, y
}

// BenchmarkWriteReadMsgControl sends one 64-byte message with a control
// message and receives it with its control data.
func BenchmarkWriteReadMsgControl(b *testing.B) {
	x, y := credPair(b)
	payload, buf := make([]byte, 64), make([]byte, 64)
	soob, roob := credsCmsg(), make([]byte, 128)
	b.ReportAllocs()
	b.SetBytes(int64(len(payload)))
	for b.Loop() {
		if _, err := x.WriteMsg(payload, soob, noAddr); err != nil {
			b.Fatal(err)
		}
		n, oobn, _, _, err := y.ReadMsg(buf, roob)
		if err != nil || n != len(payload) || oobn == 0 {
			b.Fatalf("ReadMsg = %d, %d, %v", n, oobn, err)
		}
	}
}

// BenchmarkBatch32Control sends 32 messages with control data with
// WriteBatch and receives them with ReadBatch.
func BenchmarkBatch32Control(b *testing.B) {
	x, y := credPair(b)
	const n = 32
	out, in := make([]Message, n), make([]Message, n)
	soob := credsCmsg()
	for i := range out {
		out[i] = Message{Buffer: make([]byte, 64), OOB: soob}
		in[i] = Message{Buffer: make([]byte, 64), OOB: make([]byte, 128)}
	}
	b.ReportAllocs()
	b.SetBytes(64 * n)
	for b.Loop() {
		for sent := 0; sent < n; {
			k, err := x.WriteBatch(context.Background(), out[sent:], 0)
			if err != nil {
				b.Fatal(err)
			}
			sent += k
		}
		for got := 0; got < n; {
			k, err := y.ReadBatch(context.Background(), in[got:], 0)
			if err != nil {
				b.Fatal(err)
			}
			for _, m := range in[got : got+k] {
				if m.N != 64 || m.NN == 0 {
					b.Fatalf("message of %d bytes, %d control bytes", m.N, m.NN)
				}
			}
			got += k
		}
	}
}

// BenchmarkRoundTripPoller is a 64-byte request/response between two
// goroutines: each ReadMsg finds nothing, parks in the runtime poller and
// is woken by the peer's write. Compare BenchmarkRoundTripBlocking.
// cpu-ns/op is the process's user and system time per round trip.
func BenchmarkRoundTripPoller(b *testing.B) {
	benchRoundTrip(b, func(x *Conn, resp []byte) (int, error) {
		n, _, _, _, err := x.ReadMsg(resp, nil)
		return n, err
	})
}

// BenchmarkRoundTripTimeoutEach is BenchmarkRoundTripPoller with the
// client's every read under a context of its own, made with
// context.WithTimeout and canceled after the read, as Go code commonly
// bounds each call. Compare BenchmarkRoundTripPoller: the difference is
// what such a context costs per round trip.
func BenchmarkRoundTripTimeoutEach(b *testing.B) {
	benchRoundTrip(b, func(x *Conn, resp []byte) (int, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		n, _, _, _, err := x.ReadMsgContext(ctx, resp, nil, 0)
		return n, err
	})
}

// benchRoundTrip runs the request/response of BenchmarkRoundTripPoller,
// the client reading each answer with read.
func benchRoundTrip(b *testing.B, read func(x *Conn, resp []byte) (int, error)) {
	x, y, err := socketpairConns()
	if err != nil {
		b.Fatal(err)
	}
	defer x.Close()
	defer y.Close()
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, 64)
		for {
			n, _, _, _, err := y.ReadMsg(buf, nil)
			if err != nil {
				done <- nil // closed
				return
			}
			if _, err := y.WriteMsg(buf[:n], nil, noAddr); err != nil {
				done <- err
				return
			}
		}
	}()
	req, resp := make([]byte, 64), make([]byte, 64)
	b.ReportAllocs()
	cpu0 := processCPU()
	for b.Loop() {
		if _, err := x.WriteMsg(req, nil, noAddr); err != nil {
			b.Fatal(err)
		}
		if n, err := read(x, resp); err != nil || n != 64 {
			b.Fatalf("read = %d, %v", n, err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
	y.Close()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkRoundTripBlocking is BenchmarkRoundTripPoller with blocking
// sockets and raw sendmsg/recvmsg, as a C program would do it: the
// reference for what the poller costs per round trip.
func BenchmarkRoundTripBlocking(b *testing.B) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(fds[0])
	type hdr struct {
		h   unix.Msghdr
		iov unix.Iovec
		buf [64]byte
	}
	mk := func() *hdr {
		h := new(hdr)
		h.iov.Base = &h.buf[0]
		h.iov.SetLen(len(h.buf))
		h.h.Iov = &h.iov
		h.h.SetIovlen(1)
		return h
	}
	call := func(trap uintptr, fd int, h *hdr) (int, error) {
		for {
			n, _, e := unix.Syscall(trap, uintptr(fd), uintptr(unsafe.Pointer(&h.h)), 0)
			if e == unix.EINTR {
				continue
			}
			if e != 0 {
				return 0, e
			}
			return int(n), nil
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer unix.Close(fds[1])
		h := mk()
		for {
			n, err := call(unix.SYS_RECVMSG, fds[1], h)
			if err != nil || n == 0 {
				return // peer closed
			}
			if _, err := call(unix.SYS_SENDMSG, fds[1], h); err != nil {
				return
			}
		}
	}()
	h := mk()
	b.ReportAllocs()
	cpu0 := processCPU()
	for b.Loop() {
		if _, err := call(unix.SYS_SENDMSG, fds[0], h); err != nil {
			b.Fatal(err)
		}
		if n, err := call(unix.SYS_RECVMSG, fds[0], h); err != nil || n != 64 {
			b.Fatalf("recvmsg = %d, %v", n, err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
	unix.Shutdown(fds[0], unix.SHUT_WR)
	<-done
}

// processCPU returns the process's user and system CPU time in nanoseconds.
func processCPU() int64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
