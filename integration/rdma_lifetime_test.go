//go:build integration

package integration

import (
	"bytes"
	"context"
	"errors"
	"net"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/go-rds/rds/barrier"
	"github.com/go-rds/rds/cmsg"
	"github.com/go-rds/rds/integration/vmtest"
	"github.com/go-rds/rds/rdmaops"
	"github.com/go-rds/rds/rdssock"
)

// TestIntegrationGetMRRefused: RDS_GET_MR and RDS_GET_MR_FOR_DEST fail
// with EOPNOTSUPP over Soft-RoCE (FRWR), through rdmaops' typed calls,
// leaving the region without users; Register then settles on
// RDS_CMSG_RDMA_MAP and works.
func TestIntegrationGetMRRefused(t *testing.T) {
	vmtest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	server := newRDMAEnd(t, vmtest.IBAddr1, nil, nil, nil)
	client := newRDMAEnd(t, vmtest.IBAddr2, nil, nil, nil)
	// A connection from the client's address first: without one,
	// RDS_GET_MR has no device and fails with ENODEV instead.
	if _, err := client.sock.WriteMsgContext(ctx, []byte("hi"), nil, server.addr(), 0); err != nil {
		t.Fatal(err)
	}
	if m := server.recv(t, "hello"); string(m.data) != "hi" {
		t.Fatalf("got %q", m.data)
	}
	region, err := rdmaops.NewRegion(4096)
	if err != nil {
		t.Fatal(err)
	}
	span := region.Span(0, 4096)
	for _, name := range []string{"GetMR", "GetMRForDest"} {
		var mr *rdmaops.MR
		if name == "GetMR" {
			mr, err = client.c.GetMR(span, cmsg.FlagReadWrite|cmsg.FlagInvalidate)
		} else {
			mr, err = client.c.GetMRForDest(server.addr(), span, cmsg.FlagReadWrite|cmsg.FlagInvalidate)
		}
		t.Logf("%s over rxe on %s: %v", name, vmtest.KernelRelease(), err)
		if mr != nil || !errors.Is(err, syscall.EOPNOTSUPP) || !errors.Is(err, rdssock.ErrNotSupported) {
			t.Fatalf("%s = %v, %v; want EOPNOTSUPP (rdssock.ErrNotSupported)", name, mr, err)
		}
		var oe *net.OpError
		if !errors.As(err, &oe) {
			t.Errorf("%s error %T is not a *net.OpError", name, err)
		}
		if region.Users() != 0 {
			t.Fatalf("refused %s left %d users on the region", name, region.Users())
		}
	}
	mr, err := client.c.Register(ctx, span, cmsg.FlagReadWrite, server.addr(), []byte("key"))
	if err != nil {
		t.Fatal(err)
	}
	if m := server.recv(t, "registration"); !m.hasDest || m.dest != mr.Cookie() {
		t.Fatalf("registration message %q, cookie %v (%v)", m.data, m.dest, m.hasDest)
	}
	if client.c.RegMode() != rdmaops.RegMap || region.Users() != 1 {
		t.Fatalf("after Register: mode %v, region users %d", client.c.RegMode(), region.Users())
	}
	if err := mr.Free(); err != nil {
		t.Fatal(err)
	}
	if err := region.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestIntegrationLateTransferQuarantine: an RDMA READ into a pool buffer
// outlives its deadline (1 µs), so the tracker reports it timed out while
// the adapter is still to write the buffer. The buffer's user hands it
// back at once, but the pool does not lend it again before the kernel's
// late status released the operation; the other buffer, lent and filled
// meanwhile, never receives the late data, which does land in the
// quarantined buffer.
func TestIntegrationLateTransferQuarantine(t *testing.T) {
	vmtest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	server := newRDMAEnd(t, vmtest.IBAddr1, nil, nil, nil)
	client := newRDMAEnd(t, vmtest.IBAddr2, nil, nil, nil)
	const size, rounds = rdmaOpSize, 20

	creg, err := rdmaops.NewRegion(rdmaMRSize)
	if err != nil {
		t.Fatal(err)
	}
	mrs, cookies := registerClientMRs(t, ctx, client, server, creg)
	pool, err := rdmaops.NewPool(ctx, server.c.Registrar(client.addr(), []byte("pool")), 2, size, cmsg.FlagReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		client.recv(t, "pool registration")
	}
	tr := server.c.Tracker()

	var (
		late, onTime   int
		quarantine     []time.Duration // hand-back to lent again
		landedAtReport []int           // bytes of the transfer in the buffer when the timeout was reported
		afterHandBack  int             // rounds where the data landed after the buffer was handed back
		lateStatuses   = map[barrier.Status]int{}
	)
	for r := range rounds {
		v := byte(0x10 + r)
		clear(creg.Bytes())
		for i := range size {
			creg.Bytes()[i] = v
		}
		b := pool.TryGet()
		if b == nil {
			t.Fatalf("round %d: no buffer available at the start", r)
		}
		clear(b.Bytes())
		lateBefore := tr.Stats().Late
		tok, err := server.c.Do(ctx, client.addr(), &rdmaops.Op{Remote: cookies[0], Local: []rdmaops.Span{b.Span()}, Flags: cmsg.FlagFence, Deadline: time.Now().Add(time.Microsecond)})
		if err != nil {
			t.Fatalf("round %d: READ: %v", r, err)
		}
		st, err := tr.Wait(ctx, tok)
		if err != nil {
			t.Fatal(err)
		}
		if st != barrier.TimedOut {
			if st != barrier.Success || !allByteIs(b.Bytes(), v) {
				t.Fatalf("round %d: status %v before the deadline; data in place: %v", r, st, allByteIs(b.Bytes(), v))
			}
			onTime++
			b.Release()
			continue
		}
		late++
		atReport := bytes.Count(b.Bytes(), []byte{v})
		landedAtReport = append(landedAtReport, atReport)
		// The user learns of the timeout and hands the buffer back.
		handBack := time.Now()
		if err := b.Release(); err != nil {
			t.Fatalf("round %d: Release: %v", r, err)
		}
		complete := allByteIs(b.Bytes(), v)
		state, mark := b.State(), tr.HighWater()
		if tr.Stats().Late == lateBefore { // read last: no release yet when state and mark were read
			if state != rdmaops.Quarantined || mark >= tok {
				t.Fatalf("round %d: timed-out READ not released, yet buffer %v, mark %d (token %d)", r, state, mark, tok)
			}
			if !complete {
				afterHandBack++
			}
		}
		// Another user takes the other buffer and fills it; the
		// quarantined one is not lent before the late status.
		var other *rdmaops.Buffer
		for {
			o := pool.TryGet()
			if o == b {
				if tr.Stats().Late == lateBefore {
					t.Fatalf("round %d: buffer lent again before the late status of its READ", r)
				}
				quarantine = append(quarantine, time.Since(handBack))
				break
			}
			if o != nil {
				if other != nil {
					t.Fatalf("round %d: a third buffer from a pool of two", r)
				}
				other = o
				for i := range other.Bytes() {
					other.Bytes()[i] = 0xC0
				}
			}
			if time.Since(handBack) > 30*time.Second {
				t.Fatalf("round %d: no late status for the timed-out READ after 30 s (buffer %v, stats %+v)", r, b.State(), tr.Stats())
			}
			time.Sleep(50 * time.Microsecond)
		}
		st2 := tr.Stats()
		for s, n := range st2.LateStatus {
			if n > 0 {
				lateStatuses[barrier.Status(s)] = int(n)
			}
		}
		if st2.LateStatus[barrier.Success] > 0 && !allByteIs(b.Bytes(), v) {
			t.Fatalf("round %d: late success, but the buffer holds %d of %d bytes of the transfer", r, bytes.Count(b.Bytes(), []byte{v}), size)
		}
		if other != nil && !allByteIs(other.Bytes(), 0xC0) {
			t.Fatalf("round %d: the late transfer reached the buffer lent to another user", r)
		}
		if other != nil {
			other.Release()
		}
		if err := b.Release(); err != nil {
			t.Fatal(err)
		}
	}
	st := tr.Stats()
	slices.Sort(quarantine)
	var qmin, qmed, qmax time.Duration
	if len(quarantine) > 0 {
		qmin, qmed, qmax = quarantine[0], quarantine[len(quarantine)/2], quarantine[len(quarantine)-1]
	}
	none := 0
	for _, n := range landedAtReport {
		if n == 0 {
			none++
		}
	}
	t.Logf("kernel %s: %d READs of %d B with a 1µs deadline: %d reported timed out, %d completed first; late statuses %v; quarantine (hand-back to lent again) min %v median %v max %v; at the timeout report %d of %d timed-out READs had not written a byte yet, and in %d the data landed after the user handed the buffer back; the other buffer never changed; tracker quarantined now %d, pool %+v",
		vmtest.KernelRelease(), rounds, size, late, onTime, lateStatuses, qmin, qmed, qmax, none, late, afterHandBack, st.Quarantined, pool.Stats())
	if late == 0 {
		t.Fatal("no READ outlived its deadline: the test did not exercise the quarantine")
	}
	if st.Late != uint64(late) || st.Quarantined != 0 || tr.HighWater() != tr.Last() {
		t.Fatalf("tracker: %d late statuses for %d timeouts, %d quarantined, mark %d of %d", st.Late, late, st.Quarantined, tr.HighWater(), tr.Last())
	}
	if err := pool.Close(); err != nil {
		t.Fatal(err)
	}
	for _, mr := range mrs {
		mr.Free()
	}
}

func allByteIs(b []byte, v byte) bool {
	for _, x := range b {
		if x != v {
			return false
		}
	}
	return true
}
