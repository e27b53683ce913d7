//go:build linux

package rdmaops

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"

	"github.com/go-rds/rds/cmsg"
)

// A Registrar registers and frees memory for a Pool. (*Conn).Registrar
// returns one bound to a peer; tests use fakes.
type Registrar interface {
	Register(ctx context.Context, s Span, flags cmsg.Flags) (cmsg.Cookie, error)
	Deregister(ck cmsg.Cookie, flags cmsg.Flags) error
}

// Registrar returns a Registrar that registers memory on c for the peer at
// to: each registration sends msg (which may be empty) to the peer with
// the new cookie.
func (c *Conn) Registrar(to netip.AddrPort, msg []byte) Registrar {
	return &connRegistrar{c: c, to: to, msg: msg, mrs: make(map[cmsg.Cookie]*MR)}
}

type connRegistrar struct {
	c   *Conn
	to  netip.AddrPort
	msg []byte
	mu  sync.Mutex
	mrs map[cmsg.Cookie]*MR
}

func (r *connRegistrar) Register(ctx context.Context, s Span, flags cmsg.Flags) (cmsg.Cookie, error) {
	mr, err := r.c.Register(ctx, s, flags, r.to, r.msg)
	if err != nil {
		return 0, err
	}
	r.mu.Lock()
	r.mrs[mr.cookie] = mr
	r.mu.Unlock()
	return mr.cookie, nil
}

func (r *connRegistrar) Deregister(ck cmsg.Cookie, flags cmsg.Flags) error {
	r.mu.Lock()
	mr := r.mrs[ck]
	delete(r.mrs, ck)
	r.mu.Unlock()
	if mr == nil {
		return fmt.Errorf("%w: cookie %v", ErrFreed, ck)
	}
	return mr.FreeFlags(flags)
}

// BufState is where a pool buffer is in its cycle.
type BufState int32

// Buffer states, in cycle order.
const (
	Available      BufState = iota // in the pool, registered, ready to lend
	InTransmission                 // lent out: its cookie travels to the peer, which may read or write it
	Reading                        // the data landed; the reader is consuming it in place
	Returning                      // handed back; being re-armed (re-registered if needed)
	Quarantined                    // held out of circulation: the kernel or the peer may still use the memory (see Pool)
)

// String returns the state's name.
func (s BufState) String() string {
	switch s {
	case Available:
		return "available"
	case InTransmission:
		return "in transmission"
	case Reading:
		return "reading"
	case Returning:
		return "returning"
	case Quarantined:
		return "quarantined"
	}
	return fmt.Sprintf("BufState(%d)", int32(s))
}

// A Buffer is one pre-registered buffer of a Pool.
type Buffer struct {
	p      *Pool
	idx    int
	span   Span
	cookie atomic.Uint64 // cmsg.Cookie; Lookup reads it while re-registration writes it
	state  atomic.Int32
	stale  bool // the key must be replaced when the buffer returns
	uses   uint64

	// ops counts this Conn's operations that use the buffer as local
	// memory and are not yet released by their tracker; revoked is set
	// from Revoke until Confirm. Either keeps a Quarantined buffer out of
	// circulation.
	ops     atomic.Int32
	revoked atomic.Bool
}

// Index returns the buffer's number in its pool (0 to Len()-1), the value
// to put in a protocol message so the reader can find it with Pool.Buffer.
func (b *Buffer) Index() int { return b.idx }

// Cookie returns the buffer's current registration cookie.
func (b *Buffer) Cookie() cmsg.Cookie { return cmsg.Cookie(b.cookie.Load()) }

// Span returns the buffer's memory as a Span, Bytes as a byte slice.
func (b *Buffer) Span() Span    { return b.span }
func (b *Buffer) Bytes() []byte { return b.span.Bytes() }

// State returns the buffer's state.
func (b *Buffer) State() BufState { return BufState(b.state.Load()) }

// Landed records that the data the peer transferred into the buffer is in
// place (its immediate data arrived): InTransmission to Reading. The reader
// consumes Bytes() and then calls Release.
func (b *Buffer) Landed() error {
	if !b.state.CompareAndSwap(int32(InTransmission), int32(Reading)) {
		return fmt.Errorf("%w: Landed on a buffer %v", ErrBufferState, b.State())
	}
	return nil
}

// Release hands the buffer back: from Reading (consumed), or from
// InTransmission when the peer is done with it without a landing (for
// example it read the buffer and its immediate data said the buffer is free
// again). The buffer is Returning while it is re-armed, then Available; if
// an operation of a Conn that used it as local memory is not yet released
// (it timed out and the kernel may still use the memory), the buffer is
// Quarantined until that operation is released, and becomes Available
// then by itself.
func (b *Buffer) Release() error { return b.ret(false) }

// Fail hands the buffer back after an operation on it failed or timed out:
// its key is freed (invalidated) and the buffer registered anew before it
// becomes Available (after the quarantine Release describes, if any).
// Because the kernel does not revoke a freed key at once (see the package
// documentation), a late transfer by the peer with the old cookie can still
// land in the buffer after it was lent again; use Fail only when the peer
// is known to be done with the old cookie, and Revoke and Confirm
// otherwise.
func (b *Buffer) Fail() error { return b.ret(true) }

// Revoke takes a lent buffer (InTransmission or Reading) out of
// circulation after an operation on it failed, timed out or was abandoned:
// the key is freed with invalidation and the buffer becomes Quarantined.
// Its memory stays mapped and is never lent again until Confirm, so a late
// transfer by the peer with the old cookie, which the kernel may still
// accept for a while after the free, can only land in this buffer and never
// in memory that holds other data. Call Confirm once the peer said it is
// done with the old cookie (any later message from the peer proves that
// its earlier RDMA against the cookie completed, since RDS delivers a
// peer's messages after its earlier RDMA operations on the connection).
//
// Revoke returns the error of the free; the buffer is Quarantined either way.
func (b *Buffer) Revoke() error {
	p := b.p
	p.mu.Lock()
	defer p.mu.Unlock()
	// Mark first: once Quarantined, an operation's release must find the
	// buffer revoked and leave it alone.
	was := b.revoked.Swap(true)
	if !b.state.CompareAndSwap(int32(InTransmission), int32(Quarantined)) &&
		!b.state.CompareAndSwap(int32(Reading), int32(Quarantined)) {
		if !was {
			b.revoked.Store(false)
			b.settle() // a release may have skipped it meanwhile
		}
		return fmt.Errorf("%w: revoking a buffer %v", ErrBufferState, b.State())
	}
	p.quarantined.Add(1)
	if p.closed.Load() {
		return ErrPoolClosed
	}
	b.stale = true
	err := p.reg.Deregister(b.Cookie(), cmsg.FlagInvalidate)
	p.stats.deregs.Add(1)
	if err != nil && p.flags&cmsg.FlagUseOnce != 0 {
		err = nil // the kernel may have dropped a use-once key already
	}
	return err
}

// Confirm ends the quarantine of a revoked buffer once the peer confirmed
// that it no longer uses the buffer's old cookie: the buffer is registered
// under a new key and becomes Available, or stays Quarantined until the
// operations of a Conn that still use it are released. If the
// registration fails the buffer stays Quarantined and Confirm may be
// called again.
func (b *Buffer) Confirm() error {
	if b.State() != Quarantined || !b.revoked.Load() {
		return fmt.Errorf("%w: confirming a buffer %v", ErrBufferState, b.State())
	}
	p := b.p
	p.mu.Lock()
	if p.closed.Load() {
		p.mu.Unlock()
		return ErrPoolClosed
	}
	ck, err := p.reg.Register(context.Background(), b.span, p.flags)
	if err != nil {
		p.mu.Unlock()
		return err
	}
	p.stats.regs.Add(1)
	b.cookie.Store(uint64(ck))
	b.stale = false
	b.revoked.Store(false)
	p.mu.Unlock()
	b.settle()
	return nil
}

// settle returns a Quarantined buffer to the pool once nothing holds it
// any more: no revocation awaiting Confirm, no operation not yet released.
// Whoever lifts the last hold calls it; the state CAS makes one of them win.
func (b *Buffer) settle() {
	if b.revoked.Load() || b.ops.Load() != 0 {
		return
	}
	if !b.state.CompareAndSwap(int32(Quarantined), int32(Returning)) {
		return
	}
	p := b.p
	p.quarantined.Add(-1)
	if b.stale || p.flags&cmsg.FlagUseOnce != 0 {
		// Re-registration makes syscalls; settle may run under a
		// tracker's lock (an operation's release).
		go p.rearm(b)
		return
	}
	p.rearm(b)
}

// hold and unhold count an operation of a Conn that uses the buffer as
// local memory, from Do until its tracker releases it.
func (b *Buffer) hold() { b.ops.Add(1) }

func (b *Buffer) unhold() {
	if b.ops.Add(-1) == 0 {
		b.settle()
	}
}

func (b *Buffer) ret(stale bool) error {
	if !b.state.CompareAndSwap(int32(Reading), int32(Returning)) &&
		!b.state.CompareAndSwap(int32(InTransmission), int32(Returning)) {
		return fmt.Errorf("%w: returning a buffer %v", ErrBufferState, b.State())
	}
	b.stale = b.stale || stale
	if b.ops.Load() != 0 {
		// An operation still uses the memory: quarantine until its
		// release, which settles the buffer (or settle now, if it was
		// released in between).
		b.p.quarantined.Add(1)
		b.state.Store(int32(Quarantined))
		b.settle()
		return nil
	}
	return b.p.rearm(b)
}

// PoolStats are counters of a Pool.
type PoolStats struct {
	Registrations   uint64 // registrations made, warm-up included
	Deregistrations uint64 // keys freed
	Lent            uint64 // Get calls that returned a buffer
	Returned        uint64 // buffers that became Available again
	Quarantined     uint64 // buffers Quarantined now (revoked and awaiting Confirm, or used by an operation not yet released)
}

// A Pool is a fixed set of buffers of one size in one Region, registered
// once, cycling Available → InTransmission → Reading → Returning →
// Available so that hot paths never register or free memory. Keys
// registered with cmsg.FlagUseOnce are consumed by their one use, so such a
// pool registers every buffer again when it returns: the safe pattern
// against late transfers, at the price of a registration per use.
//
// A pool never lends memory that the kernel or the peer may still read or
// write. A buffer is Quarantined instead of Available while either holds:
// it was revoked (Revoke) and the peer has not confirmed (Confirm); or it
// was the local memory of an operation of a Conn (Do) that its tracker has
// not released: the operation timed out and its late status, the socket's
// close or a cancel of its destination has not come yet (see the package
// documentation). The buffer becomes Available by itself when the last
// such operation is released.
type Pool struct {
	reg    Registrar
	region *Region
	flags  cmsg.Flags
	bufs   []*Buffer
	free   chan *Buffer
	closed atomic.Bool
	mu     sync.Mutex // serialises re-registration and Close
	stats  struct{ regs, deregs, lent, returned atomic.Uint64 }
	stride int // distance between buffers in the region

	quarantined atomic.Int64
}

// NewPool maps a region for n buffers of size bytes (each rounded up to
// whole pages, so a registration exposes only its own buffer) and
// registers every buffer through reg with flags.
func NewPool(ctx context.Context, reg Registrar, n, size int, flags cmsg.Flags) (*Pool, error) {
	if n <= 0 || size <= 0 || size > MaxTransfer {
		return nil, fmt.Errorf("%w: pool of %d buffers of %d bytes", ErrBadOp, n, size)
	}
	ps := os.Getpagesize()
	stride := (size + ps - 1) &^ (ps - 1)
	r, err := NewRegion(n * stride)
	if err != nil {
		return nil, err
	}
	p := &Pool{reg: reg, region: r, flags: flags, bufs: make([]*Buffer, n), free: make(chan *Buffer, n), stride: stride}
	r.pool = p
	for i := range n {
		b := &Buffer{p: p, idx: i, span: r.Span(i*stride, size)}
		ck, err := reg.Register(ctx, b.span, flags)
		if err != nil {
			p.Close()
			return nil, err
		}
		p.stats.regs.Add(1)
		b.cookie.Store(uint64(ck))
		p.bufs[i] = b
		p.free <- b
	}
	return p, nil
}

// Len returns the number of buffers.
func (p *Pool) Len() int { return len(p.bufs) }

// Buffer returns buffer i, or nil if there is none.
func (p *Pool) Buffer(i int) *Buffer {
	if i < 0 || i >= len(p.bufs) {
		return nil
	}
	return p.bufs[i]
}

// Lookup returns the buffer registered under ck, or nil.
func (p *Pool) Lookup(ck cmsg.Cookie) *Buffer {
	for _, b := range p.bufs {
		if b != nil && b.Cookie() == ck {
			return b
		}
	}
	return nil
}

// bufferAt returns the buffer holding region offset off, or nil.
func (p *Pool) bufferAt(off int) *Buffer {
	i := off / p.stride
	if i < 0 || i >= len(p.bufs) {
		return nil
	}
	return p.bufs[i]
}

// Get lends an Available buffer (now InTransmission), waiting until one is
// returned or ctx is done.
func (p *Pool) Get(ctx context.Context) (*Buffer, error) {
	if p.closed.Load() {
		return nil, ErrPoolClosed
	}
	select {
	case b, ok := <-p.free:
		return p.lend(b, ok)
	default:
	}
	select {
	case b, ok := <-p.free:
		return p.lend(b, ok)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// TryGet is Get without waiting; it returns nil when no buffer is available.
func (p *Pool) TryGet() *Buffer {
	select {
	case b, ok := <-p.free:
		if b, err := p.lend(b, ok); err == nil {
			return b
		}
	default:
	}
	return nil
}

func (p *Pool) lend(b *Buffer, ok bool) (*Buffer, error) {
	if !ok || p.closed.Load() {
		return nil, ErrPoolClosed
	}
	if !b.state.CompareAndSwap(int32(Available), int32(InTransmission)) {
		return nil, fmt.Errorf("%w: pool held a buffer %v", ErrBufferState, b.State())
	}
	b.uses++
	p.stats.lent.Add(1)
	return b, nil
}

// rearm makes a Returning buffer Available, registering it again first if
// its key was use-once or went stale.
func (p *Pool) rearm(b *Buffer) error {
	if b.stale || p.flags&cmsg.FlagUseOnce != 0 {
		p.mu.Lock()
		if p.closed.Load() {
			p.mu.Unlock()
			return ErrPoolClosed
		}
		err := p.reg.Deregister(b.Cookie(), cmsg.FlagInvalidate)
		p.stats.deregs.Add(1)
		if err == nil || p.flags&cmsg.FlagUseOnce != 0 {
			var ck cmsg.Cookie
			ck, err = p.reg.Register(context.Background(), b.span, p.flags)
			if err == nil {
				p.stats.regs.Add(1)
				b.cookie.Store(uint64(ck))
				b.stale = false
			}
		}
		p.mu.Unlock()
		if err != nil {
			return err // the buffer stays Returning: out of circulation
		}
	}
	b.state.Store(int32(Available))
	p.stats.returned.Add(1)
	p.free <- b
	return nil
}

// Stats returns the pool's counters.
func (p *Pool) Stats() PoolStats {
	return PoolStats{
		Registrations:   p.stats.regs.Load(),
		Deregistrations: p.stats.deregs.Load(),
		Lent:            p.stats.lent.Load(),
		Returned:        p.stats.returned.Load(),
		Quarantined:     uint64(p.quarantined.Load()),
	}
}

// Close frees every buffer's key and unmaps the region. Buffers still lent
// out are freed too: the caller must know that no transfer can still touch
// them. Revoked buffers, whose keys Revoke already freed, are unmapped
// with the rest: a late transfer against a key the kernel has not revoked
// yet then lands in pages the kernel still holds pinned for that key and
// that no longer belong to the process, never in memory the process
// reuses. Close fails with ErrBusy, leaving the memory mapped, if an
// operation of a Conn still uses it (not yet released by its tracker);
// call Close again once it is released to unmap the region.
func (p *Pool) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed.CompareAndSwap(false, true) {
		return p.region.Close() // nil once unmapped
	}
	var first error
	for _, b := range p.bufs {
		if b == nil || b.revoked.Load() {
			continue // never registered, or its key already freed by Revoke
		}
		if err := p.reg.Deregister(b.Cookie(), cmsg.FlagInvalidate); err != nil && first == nil {
			first = err
		}
		p.stats.deregs.Add(1)
	}
	if err := p.region.Close(); err != nil && first == nil {
		first = err
	}
	return first
}
