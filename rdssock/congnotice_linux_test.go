//go:build linux

package rdssock

import (
	"bytes"
	"net/netip"
	"testing"
	"unsafe"

	"github.com/go-rds/rds/cmsg"
	"golang.org/x/sys/unix"
)

// congNotice returns the control data the kernel delivers with a
// congestion notice.
func congNotice(t *testing.T) []byte {
	t.Helper()
	b := cmsg.NewBuilder(nil)
	b.CongUpdate(1 << 7)
	data, err := b.Finish()
	if err != nil || len(data) != congNoticeSpace {
		t.Fatalf("notice: %d bytes, %v; want %d", len(data), err, congNoticeSpace)
	}
	return data
}

func TestIsCongNotice(t *testing.T) {
	notice := congNotice(t)
	other := cmsg.NewBuilder(nil)
	other.RDMAStatus(cmsg.Notify{UserToken: 1})
	status, _ := other.Finish()
	withCtl := func(ctl []byte) unix.Msghdr {
		var h unix.Msghdr
		if len(ctl) > 0 {
			h.Control = &ctl[0]
			h.SetControllen(len(ctl))
		}
		return h
	}
	for _, tc := range []struct {
		name string
		n    int
		hdr  func() unix.Msghdr
		want bool
	}{
		{"notice", 0, func() unix.Msghdr { return withCtl(notice) }, true},
		{"notice with data", 3, func() unix.Msghdr { return withCtl(notice) }, false},
		{"notice with a sender", 0, func() unix.Msghdr { h := withCtl(notice); h.Namelen = unix.SizeofSockaddrInet4; return h }, false},
		{"cut notice", 0, func() unix.Msghdr { h := withCtl(notice); h.Flags = unix.MSG_CTRUNC; return h }, false},
		{"RDMA status", 0, func() unix.Msghdr { return withCtl(status) }, false},
		{"no control data", 0, func() unix.Msghdr { return withCtl(nil) }, false},
	} {
		h := tc.hdr()
		if got := isCongNotice(tc.n, &h); got != tc.want {
			t.Errorf("%s: isCongNotice = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// kernelFills plays the kernel's part of recvmmsg for receive i of op: the
// data, its control data and its sender.
func kernelFills(op *batchOp, ms []Message, i int, data, ctl []byte, from netip.AddrPort) {
	h := &op.hdrs[i]
	h.len = uint32(copy(ms[i].Buffer, data))
	h.hdr.SetControllen(copy(unsafe.Slice(h.hdr.Control, op.ctlLens[i]), ctl))
	h.hdr.Namelen = 0
	if from.IsValid() {
		h.hdr.Namelen, _ = op.addrs[i].put(from)
	}
}

func TestReadBatchSkipsCongNotices(t *testing.T) {
	notice := congNotice(t)
	from := netip.MustParseAddrPort("10.0.0.1:4000")
	batch := func(bufLens ...int) []Message {
		ms := make([]Message, len(bufLens))
		for i, n := range bufLens {
			ms[i].Buffer = make([]byte, n)
		}
		return ms
	}
	t.Run("notices leave the batch, later messages move down", func(t *testing.T) {
		ms := batch(8, 8, 8, 8)
		op, err := getBatch(ms, 0, false, true)
		if err != nil {
			t.Fatal(err)
		}
		defer putBatch(op)
		kernelFills(op, ms, 0, []byte("one"), nil, from)
		kernelFills(op, ms, 1, nil, notice, netip.AddrPort{})
		kernelFills(op, ms, 2, []byte("two"), nil, from)
		kernelFills(op, ms, 3, []byte("three"), nil, from)
		n := op.fill(ms, 4)
		var got []string
		for _, m := range ms[:n] {
			if m.Addr != from || m.Flags != 0 || m.NN != 0 {
				t.Errorf("message %q: Addr %v, Flags %#x, NN %d", m.Buffer[:m.N], m.Addr, m.Flags, m.NN)
			}
			got = append(got, string(m.Buffer[:m.N]))
		}
		if want := []string{"one", "two", "three"}; !equal(got, want) {
			t.Fatalf("batch = %q, want %q", got, want)
		}
	})
	t.Run("a message that would not fit stops the moving", func(t *testing.T) {
		ms := batch(8, 2, 8)
		op, _ := getBatch(ms, 0, false, true)
		defer putBatch(op)
		kernelFills(op, ms, 0, []byte("one"), nil, from)
		kernelFills(op, ms, 1, nil, notice, netip.AddrPort{})
		kernelFills(op, ms, 2, []byte("three"), nil, from)
		if n := op.fill(ms, 3); n != 3 {
			t.Fatalf("fill = %d, want 3 (no moving)", n)
		}
		if m := ms[1]; m.N != 0 || m.NN != 0 || m.Flags != 0 || m.Addr.IsValid() {
			t.Errorf("notice entry = %+v; want an empty entry", m)
		}
		if got := string(ms[2].Buffer[:ms[2].N]); got != "three" {
			t.Errorf("last message %q, want \"three\"", got)
		}
	})
	t.Run("control data too big for a small OOB is cut, as the kernel does", func(t *testing.T) {
		ms := batch(8, 8)
		ms[1].OOB = make([]byte, 4)
		op, _ := getBatch(ms, 0, false, true)
		defer putBatch(op)
		status := cmsg.NewBuilder(nil)
		status.RDMAStatus(cmsg.Notify{UserToken: 9})
		ctl, _ := status.Finish()
		kernelFills(op, ms, 0, nil, notice, netip.AddrPort{})
		kernelFills(op, ms, 1, nil, ctl[:congNoticeSpace], netip.AddrPort{})
		op.hdrs[1].hdr.Flags = unix.MSG_CTRUNC // the status did not fit the op's buffer
		n := op.fill(ms, 2)
		if n != 1 || ms[0].Flags&unix.MSG_CTRUNC == 0 || ms[0].NN != 0 {
			t.Fatalf("fill = %d, first %+v; want 1 message flagged MSG_CTRUNC with NN 0", n, ms[0])
		}
	})
	t.Run("without skipping nothing changes", func(t *testing.T) {
		ms := batch(8, 8)
		ms[1].OOB = make([]byte, 64)
		op, _ := getBatch(ms, 0, false, false)
		defer putBatch(op)
		kernelFills(op, ms, 0, []byte("one"), nil, from)
		kernelFills(op, ms, 1, nil, notice, netip.AddrPort{})
		if n := op.fill(ms, 2); n != 2 || ms[1].NN != congNoticeSpace || !bytes.Equal(ms[1].OOB[:ms[1].NN], notice) {
			t.Fatalf("fill = %d, notice entry %+v; want the notice delivered", n, ms[1])
		}
	})
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A control buffer of the op's own holds the notice when the caller gave
// none, and control data that fits the caller's oob is handed over.
func TestHandOver(t *testing.T) {
	var c Conn
	op, _ := c.getOp(0, nil, nil, 0)
	defer c.putOp(false, op)
	op.useOwnControl()
	if op.ctlLen != congNoticeSpace || op.hdr.Control != &op.ctl[0] {
		t.Fatalf("useOwnControl: ctlLen %d", op.ctlLen)
	}
	copy(op.ctl[:], congNotice(t))
	op.hdr.SetControllen(congNoticeSpace)
	if n, f := op.handOver(nil); n != 0 || f&unix.MSG_CTRUNC == 0 {
		t.Errorf("handOver(nil) = %d, %#x; want 0 and MSG_CTRUNC", n, f)
	}
	oob := make([]byte, congNoticeSpace)
	if n, f := op.handOver(oob); n != congNoticeSpace || f != 0 || !bytes.Equal(oob, op.ctl[:]) {
		t.Errorf("handOver(%d bytes) = %d, %#x; want all of it", len(oob), n, f)
	}
}

// A Conn keeps one op per direction: a call after call gets the same one
// back, and a call while another has it gets its own.
func TestConnKeepsOps(t *testing.T) {
	var c Conn
	r, _ := c.getOp(0, nil, nil, 0)
	c.putOp(false, r)
	if again, _ := c.getOp(0, nil, nil, 0); again != r {
		t.Errorf("second read got another op than the one kept")
	} else {
		other, _ := c.getOp(0, nil, nil, 0)
		if other == r {
			t.Fatalf("a read while another runs got the same op")
		}
		w, _ := c.getOp(1, nil, nil, 0)
		if w == r || w == other {
			t.Fatalf("a write got a read's op")
		}
		c.putOp(false, again)
		c.putOp(false, other) // c keeps one already: to the pool
		c.putOp(true, w)
		if c.op[0] != r || c.op[1] != w || c.opBusy[0].Load() || c.opBusy[1].Load() {
			t.Errorf("kept ops: %p %p (busy %v %v), want %p %p, free", c.op[0], c.op[1], c.opBusy[0].Load(), c.opBusy[1].Load(), r, w)
		}
		if other.kept {
			t.Errorf("the pool's op is marked as kept")
		}
	}
}
