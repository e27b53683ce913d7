//go:build linux

package rdssock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestReadWriteBatch(t *testing.T) {
	a, b := pair(t)
	if err := b.setInt("SO_PASSCRED", unix.SOL_SOCKET, unix.SO_PASSCRED, 1); err != nil {
		t.Fatal(err)
	}
	out := make([]Message, 5)
	for i := range out {
		out[i].Buffer = []byte(fmt.Sprintf("message %d", i))
	}
	out[2].Buffer = nil // an empty message with control data must stay empty
	out[2].OOB = credsCmsg()
	n, err := a.WriteBatch(context.Background(), out, 0)
	if err != nil || n != len(out) {
		t.Fatalf("WriteBatch = %d, %v; want %d", n, err, len(out))
	}
	for i, m := range out {
		if m.N != len(m.Buffer) {
			t.Errorf("message %d: N = %d, want %d", i, m.N, len(m.Buffer))
		}
	}
	in := make([]Message, 8)
	for i := range in {
		in[i].Buffer, in[i].OOB = make([]byte, 64), make([]byte, 64)
	}
	got := 0
	for got < len(out) {
		n, err := b.ReadBatch(context.Background(), in[got:], 0)
		if err != nil {
			t.Fatalf("ReadBatch: %v", err)
		}
		got += n
	}
	for i := range out {
		m := in[i]
		if !bytes.Equal(m.Buffer[:m.N], out[i].Buffer) {
			t.Errorf("message %d: %q, want %q", i, m.Buffer[:m.N], out[i].Buffer)
		}
		// With SO_PASSCRED every AF_UNIX message carries credentials.
		if m.NN == 0 {
			t.Errorf("message %d: no control data", i)
		}
	}
}

// TestReadBatchKeptOp: the op a Conn keeps for ReadBatch stays prepared
// for the buffers of its last call, with the header fields recvmmsg wrote
// restored, and a call with another buffer in some slot, or a shorter
// one, receives into that one.
func TestReadBatchKeptOp(t *testing.T) {
	a, b := pair(t)
	ms := make([]Message, 2)
	for i := range ms {
		ms[i].Buffer, ms[i].OOB = make([]byte, 16), make([]byte, 64)
	}
	roundTrip := func(msgs ...string) {
		t.Helper()
		for _, m := range msgs {
			if _, err := a.WriteMsg([]byte(m), nil, noAddr); err != nil {
				t.Fatal(err)
			}
		}
		n, err := b.ReadBatch(context.Background(), ms, 0)
		if err != nil || n != len(msgs) {
			t.Fatalf("ReadBatch = %d, %v; want %d", n, err, len(msgs))
		}
		for i, want := range msgs {
			if got := string(ms[i].Buffer[:ms[i].N]); got != want[:min(len(want), len(ms[i].Buffer))] {
				t.Errorf("message %d: %q, want %q", i, got, want)
			}
		}
		op := b.readBatch
		if op == nil || !op.preparedFor(ms, op.skipCong) {
			t.Fatal("the kept op is not prepared for the buffers of the call")
		}
		for i := range op.hdrs {
			h := &op.hdrs[i]
			if h.hdr.Namelen != unix.SizeofSockaddrInet6 || int(h.hdr.Controllen) != op.ctlLens[i] || h.hdr.Flags != 0 || h.len != 0 {
				t.Errorf("header %d after the call: namelen %d, controllen %d (want %d), flags %#x, len %d",
					i, h.hdr.Namelen, h.hdr.Controllen, op.ctlLens[i], h.hdr.Flags, h.len)
			}
		}
	}
	roundTrip("one", "two")
	roundTrip("three", "four")
	old := ms[1].Buffer
	ms[1].Buffer = make([]byte, 16)
	roundTrip("five", "six")
	if string(old[:3]) != "fou" {
		t.Errorf("the slot's earlier buffer was written: %q", old[:4])
	}
	ms[0].Buffer = ms[0].Buffer[:3]
	roundTrip("seven")
	if ms[0].Flags&unix.MSG_TRUNC == 0 {
		t.Errorf("a 5-byte message in a 3-byte buffer: flags %#x, want MSG_TRUNC", ms[0].Flags)
	}
}

// TestReadBatchWaits: a ReadBatch that waits is woken by a message, by
// the end of its context (the second call with one context waits
// without registering with the deadline mux), by the read deadline, and
// by Close.
func TestReadBatchWaits(t *testing.T) {
	a, b := pair(t)
	ms := []Message{{Buffer: make([]byte, 16)}, {Buffer: make([]byte, 16)}}
	type result struct {
		n   int
		err error
	}
	read := func(ctx context.Context) chan result {
		got := make(chan result, 1)
		go func() {
			n, err := b.ReadBatch(ctx, ms, 0)
			got <- result{n, err}
		}()
		return got
	}
	expect := func(got chan result, n int, want error) {
		t.Helper()
		select {
		case r := <-got:
			if r.n != n || !errors.Is(r.err, want) {
				t.Fatalf("ReadBatch = %d, %v; want %d, %v", r.n, r.err, n, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("ReadBatch still waiting after 5s")
		}
	}
	mux := &b.readDeadline
	state := func() (lockless int32, waiters int) {
		mux.mu.Lock()
		defer mux.mu.Unlock()
		return mux.lockless.Load(), len(mux.waiters)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got chan result
	for range 2 { // the second makes the mux watch ctx
		got = read(ctx)
		waitFor(t, "a registered wait", func() bool { _, w := state(); return w == 1 })
		if _, err := a.WriteMsg([]byte("one"), nil, noAddr); err != nil {
			t.Fatal(err)
		}
		expect(got, 1, nil)
	}
	got = read(ctx)
	waitFor(t, "a lockless wait", func() bool { l, w := state(); return l == 1 && w == 0 })
	cancel()
	expect(got, 0, context.Canceled)

	b.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	expect(read(context.Background()), 0, os.ErrDeadlineExceeded)
	b.SetReadDeadline(time.Time{})

	got = read(context.Background())
	// The read holds a reference to the socket while it waits, whether
	// as the solo waiter or parked (at once, when the process has no P
	// to spare: a loaded machine).
	waitFor(t, "a waiting read", func() bool { return b.k.refs.Load() > 0 })
	time.Sleep(10 * time.Millisecond) // past its try
	b.Close()
	expect(got, 0, net.ErrClosed)
}

func TestReadBatchTruncationInFlags(t *testing.T) {
	a, b := pair(t)
	if _, err := a.WriteMsg([]byte("0123456789"), nil, noAddr); err != nil {
		t.Fatal(err)
	}
	in := []Message{{Buffer: make([]byte, 4)}}
	n, err := b.ReadBatch(context.Background(), in, 0)
	if err != nil || n != 1 || in[0].N != 4 || in[0].Flags&unix.MSG_TRUNC == 0 {
		t.Fatalf("ReadBatch = %d, %v, %+v; want 1 message of 4 bytes with MSG_TRUNC", n, err, in[0])
	}
}

func TestAllocBatch(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items; allocation counts are meaningless")
	}
	a, b := pair(t)
	out, in := make([]Message, 16), make([]Message, 16)
	for i := range out {
		out[i].Buffer = make([]byte, 128)
		in[i].Buffer = make([]byte, 128)
	}
	allocs := testing.AllocsPerRun(200, func() {
		n, err := a.WriteBatch(context.Background(), out, 0)
		if err != nil || n != len(out) {
			t.Fatalf("WriteBatch = %d, %v", n, err)
		}
		for got := 0; got < n; {
			m, err := b.ReadBatch(context.Background(), in[got:], 0)
			if err != nil {
				t.Fatal(err)
			}
			got += m
		}
	})
	if allocs != 0 {
		t.Fatalf("a batch of 16 sends and receives allocated %v times; want 0", allocs)
	}
}

func BenchmarkBatch16(b *testing.B) {
	x, y, err := socketpairConns()
	if err != nil {
		b.Fatal(err)
	}
	defer x.Close()
	defer y.Close()
	out, in := make([]Message, 16), make([]Message, 16)
	for i := range out {
		out[i].Buffer, in[i].Buffer = make([]byte, 64), make([]byte, 64)
	}
	b.ReportAllocs()
	b.SetBytes(64 * 16)
	for b.Loop() {
		n, err := x.WriteBatch(context.Background(), out, 0)
		if err != nil {
			b.Fatal(err)
		}
		for got := 0; got < n; {
			m, err := y.ReadBatch(context.Background(), in[got:], 0)
			if err != nil {
				b.Fatal(err)
			}
			got += m
		}
	}
}
