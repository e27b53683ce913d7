//go:build linux

package barrier

import (
	"errors"
	"testing"

	"github.com/go-rds/rds/cmsg"
)

func notices(t testing.TB, buf []byte, ns ...cmsg.Notify) []byte {
	b := cmsg.NewBuilder(buf[:0])
	for _, n := range ns {
		b.RDMAStatus(n)
	}
	out, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestProcess(t *testing.T) {
	tr := New(nil)
	a, b, c := tr.Begin(Entry{}), tr.Begin(Entry{}), tr.Begin(Entry{})
	buf := make([]byte, 4*cmsg.RDMAStatusSpace+cmsg.RDMADestSpace)
	oob := notices(t, buf,
		cmsg.Notify{UserToken: uint64(b), Status: cmsg.StatusRemoteError},
		cmsg.Notify{UserToken: uint64(a), Status: cmsg.StatusSuccess},
		cmsg.Notify{UserToken: 4242, Status: cmsg.StatusSuccess},
	)
	// Another control message is skipped.
	bl := cmsg.NewBuilder(oob)
	bl.RDMADest(cmsg.MakeCookie(1, 2))
	oob, _ = bl.Finish()
	n, err := tr.Process(oob)
	if err != nil || n != 3 {
		t.Fatalf("Process = %d, %v", n, err)
	}
	if tr.Status(a) != Success || tr.Status(b) != RemoteError || tr.Status(c) != Pending {
		t.Fatalf("statuses %v %v %v", tr.Status(a), tr.Status(b), tr.Status(c))
	}
	if tr.HighWater() != b || tr.Stats().Unmatched != 1 {
		t.Fatalf("HighWater %d stats %+v", tr.HighWater(), tr.Stats())
	}
	// A truncated notice (MSG_CTRUNC) is an error after the whole ones.
	oob = notices(t, buf, cmsg.Notify{UserToken: uint64(c), Status: cmsg.StatusDropped})
	n, err = tr.Process(oob[:len(oob)-4])
	if n != 0 || err == nil {
		t.Fatalf("truncated notice: %d, %v", n, err)
	}
	var ce *cmsg.Error
	if !errors.As(err, &ce) {
		t.Fatalf("error %T is not a *cmsg.Error", err)
	}
	if n, err := tr.Process(nil); n != 0 || err != nil {
		t.Fatalf("Process(nil) = %d, %v", n, err)
	}
}

// Completing operations must not allocate once the ring is warm: this is
// the receive path of every RDMA operation.
func TestZeroAllocsPerCompletion(t *testing.T) {
	rel := new(plainRelease)
	tr := New(&Config{Capacity: 64, Completions: 64, OnComplete: func(Completion) {}})
	keep := new([4096]byte)
	buf := make([]byte, 8*cmsg.RDMAStatusSpace)
	var ns [8]cmsg.Notify
	allocs := testing.AllocsPerRun(200, func() {
		for i := range ns {
			tok := tr.Begin(Entry{Keep: keep, Release: rel})
			ns[i] = cmsg.Notify{UserToken: uint64(tok), Status: cmsg.StatusSuccess}
		}
		b := cmsg.NewBuilder(buf[:0])
		for _, n := range ns {
			b.RDMAStatus(n)
		}
		oob, _ := b.Finish()
		if n, err := tr.Process(oob); n != len(ns) || err != nil {
			t.Fatalf("Process = %d, %v", n, err)
		}
		for range ns {
			<-tr.Completions()
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per batch of %d completions, want 0", allocs, len(ns))
	}
	if tr.Outstanding() != 0 || tr.HighWater() != tr.Last() {
		t.Fatal("ops left pending")
	}
}

type plainRelease struct{ n int }

func (r *plainRelease) Release(Completion) { r.n++ }

func BenchmarkBeginProcess(b *testing.B) {
	tr := New(&Config{Capacity: 64})
	buf := make([]byte, cmsg.RDMAStatusSpace)
	keep := new(int)
	b.ReportAllocs()
	for b.Loop() {
		tok := tr.Begin(Entry{Keep: keep})
		bl := cmsg.NewBuilder(buf[:0])
		bl.RDMAStatus(cmsg.Notify{UserToken: uint64(tok)})
		oob, _ := bl.Finish()
		if _, err := tr.Process(oob); err != nil {
			b.Fatal(err)
		}
	}
}
