//go:build linux

package rdmaops

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"testing"
	"unsafe"

	"github.com/go-rds/rds/cmsg"
	"github.com/go-rds/rds/internal/rdsabi"
)

func newRegion(t *testing.T, size int) *Region {
	t.Helper()
	r, err := NewRegion(size)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func TestRegion(t *testing.T) {
	r := newRegion(t, 100)
	ps := os.Getpagesize()
	if r.Len() != ps {
		t.Fatalf("Len %d, want one page (%d)", r.Len(), ps)
	}
	if uintptr(unsafe.Pointer(&r.Bytes()[0]))%uintptr(ps) != 0 {
		t.Fatal("region not page-aligned")
	}
	s := r.Span(10, 20)
	s.Bytes()[0] = 7
	if r.Bytes()[10] != 7 || s.Len() != 20 || s.Offset() != 10 || s.Region() != r {
		t.Fatal("span does not alias the region")
	}
	if sub := s.Slice(5, 5); sub.Offset() != 15 || sub.Len() != 5 {
		t.Fatalf("Slice: %+v", sub)
	}
	if cap(s.Bytes()) != 20 {
		t.Fatal("span's slice can grow past its end")
	}
	for _, f := range []func(){func() { r.Span(ps-1, 2) }, func() { r.Span(-1, 1) }, func() { s.Slice(15, 6) }} {
		func() {
			defer func() {
				if recover() == nil {
					t.Error("out-of-range span did not panic")
				}
			}()
			f()
		}()
	}
	r.acquire()
	if err := r.Close(); !errors.Is(err, ErrBusy) {
		t.Fatalf("Close while in use: %v", err)
	}
	if r.Users() != 1 {
		t.Fatal("Users")
	}
	r.release()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
	if _, err := NewRegion(0); err == nil {
		t.Fatal("NewRegion(0) succeeded")
	}
}

func parseOne(t *testing.T, oob []byte) cmsg.Message {
	t.Helper()
	p := cmsg.NewParser(oob)
	m, err := p.Next()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Next(); err != io.EOF {
		t.Fatalf("more than one message: %v", err)
	}
	return m
}

func TestEncodeRDMA(t *testing.T) {
	r := newRegion(t, 3*4096)
	op := &Op{
		Write:        true,
		Remote:       cmsg.MakeCookie(0x1234, 0x10),
		RemoteOffset: 512,
		Local:        []Span{r.Span(0, 4096), r.Span(8192, 100), r.Span(5000, 12)},
		Flags:        cmsg.FlagFence | cmsg.FlagSilent | cmsg.FlagUseOnce,
	}
	var iov [MaxLocal]rdsabi.Iovec
	b := cmsg.NewBuilder(nil)
	total, err := op.total()
	if err != nil {
		t.Fatal(err)
	}
	if err := encodeRDMA(&b, op, total, &iov, 0xdead000, 77, cmsg.FlagNotifyMe); err != nil {
		t.Fatal(err)
	}
	oob, _ := b.Finish()
	a, err := parseOne(t, oob).RDMAArgs()
	if err != nil {
		t.Fatal(err)
	}
	want := cmsg.RDMAArgs{
		Cookie:       op.Remote,
		Remote:       cmsg.IOVec{Addr: 512, Bytes: 4096 + 100 + 12},
		LocalVecAddr: 0xdead000,
		NumLocal:     3,
		Flags:        cmsg.FlagReadWrite | cmsg.FlagNotifyMe | cmsg.FlagFence | cmsg.FlagSilent | cmsg.FlagUseOnce,
		UserToken:    77,
	}
	if a != want {
		t.Fatalf("RDMA_ARGS\n got %+v\nwant %+v", a, want)
	}
	base := uint64(uintptr(unsafe.Pointer(&r.Bytes()[0])))
	wantIov := []rdsabi.Iovec{{Addr: base, Bytes: 4096}, {Addr: base + 8192, Bytes: 100}, {Addr: base + 5000, Bytes: 12}}
	for i, w := range wantIov {
		if iov[i] != w {
			t.Errorf("iov[%d] = %+v, want %+v", i, iov[i], w)
		}
	}
	// A READ clears FlagReadWrite even if the caller set it.
	op.Write = false
	op.Flags = cmsg.FlagReadWrite
	b.Reset(nil)
	encodeRDMA(&b, op, total, &iov, 1, 1, cmsg.FlagNotifyMe)
	oob, _ = b.Finish()
	a, _ = parseOne(t, oob).RDMAArgs()
	if a.Flags != cmsg.FlagNotifyMe {
		t.Fatalf("READ flags %#x", a.Flags)
	}

	for name, bad := range map[string]*Op{
		"none":     {},
		"too many": {Local: make([]Span, MaxLocal+1)},
		"empty":    {Local: []Span{{}}},
		"too long": {Local: []Span{{r: r, n: MaxTransfer}, {r: r, n: 1}}},
	} {
		if _, err := bad.total(); !errors.Is(err, ErrBadOp) {
			t.Errorf("%s: err %v, want ErrBadOp", name, err)
		}
	}
}

func TestEncodeAtomics(t *testing.T) {
	r := newRegion(t, 4096)
	res := r.Span(64, 8)
	local := res.addr()
	ck := cmsg.MakeCookie(9, 0)
	for _, tc := range []struct {
		a     Atomic
		check func(m cmsg.Message) error
	}{
		{Atomic{Kind: FetchAdd, Remote: ck, RemoteOffset: 16, Result: res, Add: 5, Flags: cmsg.FlagFence}, func(m cmsg.Message) error {
			got, err := m.AtomicFADD()
			want := cmsg.AtomicFADD{Cookie: ck, LocalAddr: local, RemoteAddr: 16, Add: 5, Flags: cmsg.FlagFence | cmsg.FlagNotifyMe, UserToken: 3}
			if err == nil && got != want {
				err = fmt.Errorf("got %+v want %+v", got, want)
			}
			return err
		}},
		{Atomic{Kind: CompareSwap, Remote: ck, RemoteOffset: 8, Result: res, Compare: 1, Swap: 2}, func(m cmsg.Message) error {
			got, err := m.AtomicCSWP()
			want := cmsg.AtomicCSWP{Cookie: ck, LocalAddr: local, RemoteAddr: 8, Compare: 1, Swap: 2, Flags: cmsg.FlagNotifyMe, UserToken: 3}
			if err == nil && got != want {
				err = fmt.Errorf("got %+v want %+v", got, want)
			}
			return err
		}},
		{Atomic{Kind: MaskedFetchAdd, Remote: ck, Result: res, Add: 1 << 32, NocarryMask: 0xffff0000ffff0000}, func(m cmsg.Message) error {
			got, err := m.MaskedAtomicFADD()
			want := cmsg.MaskedAtomicFADD{Cookie: ck, LocalAddr: local, Add: 1 << 32, NocarryMask: 0xffff0000ffff0000, Flags: cmsg.FlagNotifyMe, UserToken: 3}
			if err == nil && got != want {
				err = fmt.Errorf("got %+v want %+v", got, want)
			}
			return err
		}},
		{Atomic{Kind: MaskedCompareSwap, Remote: ck, RemoteOffset: 24, Result: res, Compare: 3, Swap: 4, CompareMask: 0xff, SwapMask: 0xf0}, func(m cmsg.Message) error {
			got, err := m.MaskedAtomicCSWP()
			want := cmsg.MaskedAtomicCSWP{Cookie: ck, LocalAddr: local, RemoteAddr: 24, Compare: 3, Swap: 4, CompareMask: 0xff, SwapMask: 0xf0, Flags: cmsg.FlagNotifyMe, UserToken: 3}
			if err == nil && got != want {
				err = fmt.Errorf("got %+v want %+v", got, want)
			}
			return err
		}},
	} {
		t.Run(tc.a.Kind.String(), func(t *testing.T) {
			b := cmsg.NewBuilder(nil)
			if err := encodeAtomic(&b, &tc.a, 3); err != nil {
				t.Fatal(err)
			}
			oob, _ := b.Finish()
			if len(oob) != cmsg.AtomicSpace {
				t.Fatalf("%d bytes, want %d", len(oob), cmsg.AtomicSpace)
			}
			if err := tc.check(parseOne(t, oob)); err != nil {
				t.Fatal(err)
			}
		})
	}
	for name, bad := range map[string]Atomic{
		"kind":      {Kind: 0, Result: res},
		"result":    {Kind: FetchAdd, Result: r.Span(64, 4)},
		"unaligned": {Kind: FetchAdd, Result: r.Span(60, 8)},
		"remote":    {Kind: FetchAdd, Result: res, RemoteOffset: 3},
	} {
		b := cmsg.NewBuilder(nil)
		if err := encodeAtomic(&b, &bad, 1); !errors.Is(err, ErrBadOp) {
			t.Errorf("%s: %v, want ErrBadOp", name, err)
		}
	}
}

// Atomics stay off unless explicitly allowed, before any socket is touched.
func TestAtomicsNeedOptIn(t *testing.T) {
	c := New(nil, nil, nil)
	r := newRegion(t, 4096)
	_, err := c.DoAtomic(context.Background(), netipZero, &Atomic{Kind: FetchAdd, Result: r.Span(0, 8)})
	if !errors.Is(err, ErrAtomicsDisabled) {
		t.Fatalf("DoAtomic without AllowAtomics: %v", err)
	}
	if r.Users() != 0 || c.Tracker().Last() != 0 {
		t.Fatal("a refused atomic left state behind")
	}
}

// fakeRegistrar stands in for a Conn: it hands out increasing cookies and
// counts calls.
type fakeRegistrar struct {
	mu      sync.Mutex
	next    uint32
	live    map[cmsg.Cookie]Span
	regs    int
	deregs  int
	failReg bool
}

func (f *fakeRegistrar) Register(_ context.Context, s Span, _ cmsg.Flags) (cmsg.Cookie, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failReg {
		return 0, errors.New("fake: registration refused")
	}
	if f.live == nil {
		f.live = map[cmsg.Cookie]Span{}
	}
	f.next++
	ck := cmsg.MakeCookie(f.next, 0)
	f.live[ck] = s
	f.regs++
	return ck, nil
}

func (f *fakeRegistrar) Deregister(ck cmsg.Cookie, _ cmsg.Flags) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.live[ck]; !ok {
		return errors.New("fake: unknown cookie")
	}
	delete(f.live, ck)
	f.deregs++
	return nil
}

func TestPoolCycle(t *testing.T) {
	ctx := context.Background()
	reg := new(fakeRegistrar)
	p, err := NewPool(ctx, reg, 4, 5000, cmsg.FlagReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	if reg.regs != 4 || p.Len() != 4 {
		t.Fatalf("warm-up made %d registrations for %d buffers", reg.regs, p.Len())
	}
	// Buffers are page-aligned and do not share pages.
	ps := os.Getpagesize()
	for i := range p.Len() {
		b := p.Buffer(i)
		if b.Index() != i || len(b.Bytes()) != 5000 || b.Span().Offset()%ps != 0 || b.State() != Available {
			t.Fatalf("buffer %d: offset %d len %d state %v", i, b.Span().Offset(), len(b.Bytes()), b.State())
		}
		if p.Lookup(b.Cookie()) != b {
			t.Fatalf("Lookup(%v)", b.Cookie())
		}
	}
	const ops = 5000
	for i := range ops {
		b, err := p.Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if b.State() != InTransmission {
			t.Fatalf("lent buffer is %v", b.State())
		}
		if i%2 == 0 { // a read: the data lands, the reader consumes it
			if err := b.Landed(); err != nil {
				t.Fatal(err)
			}
			if b.State() != Reading {
				t.Fatal("not Reading after Landed")
			}
		}
		if err := b.Release(); err != nil {
			t.Fatal(err)
		}
		if b.State() != Available {
			t.Fatalf("released buffer is %v", b.State())
		}
	}
	st := p.Stats()
	if reg.regs != 4 || st.Registrations != 4 || st.Lent != ops || st.Returned != ops {
		t.Fatalf("after %d cycles: %d registrations, stats %+v", ops, reg.regs, st)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if reg.deregs != 4 || len(reg.live) != 0 {
		t.Fatalf("Close freed %d keys, %d left", reg.deregs, len(reg.live))
	}
	if _, err := p.Get(ctx); !errors.Is(err, ErrPoolClosed) {
		t.Fatalf("Get after Close: %v", err)
	}
}

func TestPoolStateErrors(t *testing.T) {
	ctx := context.Background()
	reg := new(fakeRegistrar)
	p, err := NewPool(ctx, reg, 1, 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	b := p.Buffer(0)
	if err := b.Landed(); !errors.Is(err, ErrBufferState) {
		t.Fatalf("Landed on an available buffer: %v", err)
	}
	if err := b.Release(); !errors.Is(err, ErrBufferState) {
		t.Fatalf("Release of an available buffer: %v", err)
	}
	b, _ = p.Get(ctx)
	if p.TryGet() != nil {
		t.Fatal("TryGet on an empty pool returned a buffer")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := p.Get(cctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Get on an empty pool with a canceled ctx: %v", err)
	}
	b.Landed()
	if err := b.Landed(); !errors.Is(err, ErrBufferState) {
		t.Fatalf("second Landed: %v", err)
	}
	b.Release()
	if err := b.Release(); !errors.Is(err, ErrBufferState) {
		t.Fatalf("double Release: %v", err)
	}
	if p.Buffer(1) != nil || p.Buffer(-1) != nil {
		t.Fatal("Buffer out of range")
	}
}

// A failed buffer gets a new key; a use-once pool re-registers on every
// return.
func TestPoolRekey(t *testing.T) {
	ctx := context.Background()
	reg := new(fakeRegistrar)
	p, err := NewPool(ctx, reg, 2, 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := p.Get(ctx)
	old := b.Cookie()
	if err := b.Fail(); err != nil {
		t.Fatal(err)
	}
	if b.Cookie() == old || b.State() != Available || reg.regs != 3 || reg.deregs != 1 {
		t.Fatalf("after Fail: cookie %v (old %v), state %v, regs %d deregs %d", b.Cookie(), old, b.State(), reg.regs, reg.deregs)
	}
	// A registration failure keeps the buffer out of circulation.
	b, _ = p.Get(ctx)
	reg.failReg = true
	if err := b.Fail(); err == nil {
		t.Fatal("Fail with a refusing registrar succeeded")
	}
	if b.State() != Returning {
		t.Fatalf("unregistrable buffer is %v", b.State())
	}
	reg.failReg = false
	p.Close()

	reg = new(fakeRegistrar)
	p, err = NewPool(ctx, reg, 2, 100, cmsg.FlagUseOnce)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for range 10 {
		b, _ := p.Get(ctx)
		b.Landed()
		if err := b.Release(); err != nil {
			t.Fatal(err)
		}
	}
	if reg.regs != 12 {
		t.Fatalf("use-once pool: %d registrations for 2 buffers and 10 uses, want 12", reg.regs)
	}
}

func TestPoolConcurrent(t *testing.T) {
	ctx := context.Background()
	reg := new(fakeRegistrar)
	p, err := NewPool(ctx, reg, 8, 4096, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				b, err := p.Get(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				b.Bytes()[0] = byte(w)
				if i%3 == 0 {
					b.Landed()
				}
				if err := b.Release(); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if st := p.Stats(); st.Registrations != 8 || st.Lent != 4000 {
		t.Fatalf("stats %+v", st)
	}
}

func TestNewPoolErrors(t *testing.T) {
	ctx := context.Background()
	if _, err := NewPool(ctx, new(fakeRegistrar), 0, 10, 0); !errors.Is(err, ErrBadOp) {
		t.Fatalf("empty pool: %v", err)
	}
	reg := &fakeRegistrar{failReg: true}
	if _, err := NewPool(ctx, reg, 2, 10, 0); err == nil {
		t.Fatal("pool with a refusing registrar")
	}
}

func TestStrings(t *testing.T) {
	for _, s := range []fmt.Stringer{RegAuto, RegMap, RegGetMR, RegMode(9), Available, InTransmission, Reading, Returning, Quarantined, BufState(9), FetchAdd, CompareSwap, MaskedFetchAdd, MaskedCompareSwap, AtomicKind(9)} {
		if s.String() == "" {
			t.Errorf("%#v has no name", s)
		}
	}
}

// A revoked buffer loses its key at once and stays out of circulation,
// memory untouched by the pool, until Confirm gives it a new key.
func TestPoolQuarantine(t *testing.T) {
	ctx := context.Background()
	reg := new(fakeRegistrar)
	p, err := NewPool(ctx, reg, 2, 100, cmsg.FlagReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	b, _ := p.Get(ctx)
	old := b.Cookie()
	b.Bytes()[0] = 42
	if err := b.Confirm(); !errors.Is(err, ErrBufferState) {
		t.Fatalf("Confirm of a lent buffer: %v", err)
	}
	if err := b.Revoke(); err != nil {
		t.Fatal(err)
	}
	if b.State() != Quarantined || reg.deregs != 1 || len(reg.live) != 1 || p.Stats().Quarantined != 1 {
		t.Fatalf("after Revoke: state %v, %d deregs, %d live keys, stats %+v", b.State(), reg.deregs, len(reg.live), p.Stats())
	}
	if err := b.Revoke(); !errors.Is(err, ErrBufferState) {
		t.Fatalf("second Revoke: %v", err)
	}
	if err := b.Release(); !errors.Is(err, ErrBufferState) {
		t.Fatalf("Release of a quarantined buffer: %v", err)
	}
	// Only the other buffer circulates meanwhile.
	for range 5 {
		o := p.TryGet()
		if o == nil || o == b {
			t.Fatalf("TryGet during quarantine returned %v", o)
		}
		if p.TryGet() != nil {
			t.Fatal("a second buffer was lent while one is quarantined")
		}
		o.Release()
	}
	if b.Bytes()[0] != 42 {
		t.Fatal("quarantined memory changed")
	}
	reg.failReg = true
	if err := b.Confirm(); err == nil || b.State() != Quarantined {
		t.Fatalf("Confirm with a refusing registrar: %v, state %v", err, b.State())
	}
	reg.failReg = false
	if err := b.Confirm(); err != nil {
		t.Fatal(err)
	}
	if b.State() != Available || b.Cookie() == old || p.Lookup(old) != nil || p.Stats().Quarantined != 0 {
		t.Fatalf("after Confirm: state %v, cookie %v (old %v), stats %+v", b.State(), b.Cookie(), old, p.Stats())
	}
	got := map[*Buffer]bool{}
	for range 2 {
		got[p.TryGet()] = true
	}
	if !got[b] || len(got) != 2 {
		t.Fatal("confirmed buffer not lent again")
	}
	// A buffer quarantined at Close is not freed twice.
	b.Revoke()
	deregs := reg.deregs
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if reg.deregs != deregs+1 || len(reg.live) != 0 {
		t.Fatalf("Close: %d deregistrations (had %d), %d keys live", reg.deregs, deregs, len(reg.live))
	}
}
