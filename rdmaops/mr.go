//go:build linux

package rdmaops

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/go-rds/rds/cmsg"
)

// An MR is a registration of local memory for remote access: the peer
// reads or writes it by its cookie until it is freed.
type MR struct {
	c      *Conn
	cookie cmsg.Cookie
	span   Span
	flags  cmsg.Flags
	freed  atomic.Bool
}

// Cookie returns the registration's RDMA cookie, which names it to the peer.
func (m *MR) Cookie() cmsg.Cookie { return m.cookie }

// Span returns the registered memory.
func (m *MR) Span() Span { return m.span }

// Flags returns the flags the memory was registered with.
func (m *MR) Flags() cmsg.Flags { return m.flags }

// Register registers s for remote access and sends msg to the peer at to
// together with the cookie: the peer receives msg with an
// RDS_CMSG_RDMA_DEST control message carrying it (cmsg's RDMADest, or
// HandleControl's dest). msg may be empty.
//
// flags: cmsg.FlagReadWrite marks the peer as a writer (an RDMA WRITE
// target; FRWR adapters let the peer write even without it, see the
// package BUG notes); cmsg.FlagUseOnce makes the kernel drop the key after
// the first RDMA against it (when the peer's immediate data arrives, and
// effective only some time later); cmsg.FlagInvalidate invalidates the key
// when it is freed.
//
// Register waits while the socket's send buffer is full, and (unless
// Options.FailFast) while the destination is congested, until ctx is done
// or, for congestion, the tracker's timeout (barrier.Config.Timeout) has
// passed. The first registration on a connection still being set up can
// fail with EAGAIN; Register retries it within Options.MapRetries.
func (c *Conn) Register(ctx context.Context, s Span, flags cmsg.Flags, to netip.AddrPort, msg []byte) (*MR, error) {
	if s.r == nil || s.n == 0 || s.n > MaxTransfer {
		return nil, fmt.Errorf("%w: registration of %d bytes (1 to %d)", ErrBadOp, s.n, MaxTransfer)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	if !s.r.acquire() {
		return nil, fmt.Errorf("%w: registration of a span of a closed region", ErrBadOp)
	}
	mode := c.RegMode()
	if mode == RegAuto {
		mode = c.probe(to)
	}
	var (
		cookie cmsg.Cookie
		err    error
	)
	backoff := c.opts.MapBackoff
	for try := 0; ; try++ {
		if mode == RegGetMR {
			cookie, err = c.registerGetMR(ctx, s, flags, to, msg)
		} else {
			cookie, err = c.registerMap(ctx, s, flags, to, msg)
		}
		if err == nil || !isEAGAIN(err) || try >= c.opts.MapRetries {
			break
		}
		if serr := sleepCtx(ctx, backoff); serr != nil {
			s.r.release()
			return nil, serr
		}
		if backoff < 16*c.opts.MapBackoff {
			backoff *= 2
		}
	}
	if err != nil {
		s.r.release()
		return nil, err
	}
	c.regs.Add(1)
	return &MR{c: c, cookie: cookie, span: s, flags: flags}, nil
}

// probe decides between RDS_GET_MR and RDS_CMSG_RDMA_MAP by registering a
// page of the Conn's own with RDS_GET_MR_FOR_DEST and freeing it at once,
// with invalidation: the caller's memory is never exposed under a key
// nobody announced. EOPNOTSUPP fixes the mode to RegMap; success to
// RegGetMR; any other failure (ENODEV before the first IB connection from
// this address) uses RegMap this time and probes again next time. The
// page stays mapped until Close, since a freed key is not revoked at once.
func (c *Conn) probe(to netip.AddrPort) RegMode {
	c.probeMu.Lock()
	defer c.probeMu.Unlock()
	if m := c.RegMode(); m != RegAuto {
		return m
	}
	if c.probePage == nil {
		r, err := NewRegion(1)
		if err != nil {
			return RegMap
		}
		c.probePage = r
	}
	page := c.probePage.Span(0, c.probePage.Len())
	ck, err := c.rawGetMR(to, true, page, 0)
	switch {
	case err == nil:
		c.freeMR(ck, cmsg.FlagInvalidate)
		c.mode.CompareAndSwap(uint32(RegAuto), uint32(RegGetMR))
		return RegGetMR
	case errors.Is(err, syscall.EOPNOTSUPP):
		c.mode.CompareAndSwap(uint32(RegAuto), uint32(RegMap))
	}
	return RegMap
}

func (c *Conn) registerMap(ctx context.Context, s Span, flags cmsg.Flags, to netip.AddrPort, msg []byte) (cmsg.Cookie, error) {
	sc := c.getScratch()
	defer c.putScratch(sc)
	b := cmsg.NewBuilder(sc.oob[:0])
	b.RDMAMap(cmsg.MapArgs{
		Vec:        cmsg.IOVec{Addr: s.addr(), Bytes: uint64(s.n)},
		CookieAddr: uint64(uintptr(unsafe.Pointer(&sc.cookie))),
		Flags:      flags,
	})
	oob, err := b.Finish()
	if err != nil {
		return 0, err
	}
	// A failed sendmsg frees the memory it mapped (rds_sendmsg drops the
	// key again), so a registration refused for congestion is retried.
	err = c.send(ctx, msg, oob, to, 0, time.Time{}, false)
	runtime.KeepAlive(sc)
	if err != nil {
		return 0, err
	}
	return cmsg.Cookie(sc.cookie), nil
}

func (c *Conn) registerGetMR(ctx context.Context, s Span, flags cmsg.Flags, to netip.AddrPort, msg []byte) (cmsg.Cookie, error) {
	ck, err := c.rawGetMR(to, true, s, flags)
	if err != nil {
		return 0, err
	}
	if err := c.announce(ctx, ck, to, msg); err != nil {
		c.freeMR(ck, cmsg.FlagInvalidate)
		return 0, err
	}
	return ck, nil
}

// Announce sends msg to the peer at to with the registration's cookie in
// an RDS_CMSG_RDMA_DEST control message, as Register did: how a cookie is
// offered again, to the same or another peer. It waits out a full send
// buffer and congestion as Register does.
func (c *Conn) Announce(ctx context.Context, m *MR, to netip.AddrPort, msg []byte) error {
	if m.freed.Load() {
		return ErrFreed
	}
	return c.announce(ctx, m.cookie, to, msg)
}

func (c *Conn) announce(ctx context.Context, ck cmsg.Cookie, to netip.AddrPort, msg []byte) error {
	sc := c.getScratch()
	defer c.putScratch(sc)
	b := cmsg.NewBuilder(sc.oob[:0])
	b.RDMADest(ck)
	oob, _ := b.Finish()
	return c.send(ctx, msg, oob, to, 0, time.Time{}, false)
}

// Free releases the registration (RDS_FREE_MR), with
// cmsg.FlagInvalidate if it was registered with it. The key is not revoked
// at once: see the package documentation. Freeing a use-once key the
// kernel already dropped succeeds; a second Free fails with ErrFreed.
func (m *MR) Free() error { return m.FreeFlags(m.flags & cmsg.FlagInvalidate) }

// FreeFlags is Free with explicit flags (cmsg.FlagInvalidate or 0).
func (m *MR) FreeFlags(flags cmsg.Flags) error {
	if !m.freed.CompareAndSwap(false, true) {
		return ErrFreed
	}
	err := m.c.freeMR(m.cookie, flags)
	m.span.r.release()
	m.c.deregs.Add(1)
	if err != nil && m.c.closing.Load() {
		return nil // the socket is closed: the kernel dropped its keys
	}
	if err != nil && m.flags&cmsg.FlagUseOnce != 0 && errors.Is(err, syscall.EINVAL) {
		return nil // the kernel dropped the key after its one use
	}
	return err
}

// Flush asks the transport to flush its pool of unused registrations
// (RDS_FREE_MR with a zero cookie), which makes the keys of freed
// registrations invalid without waiting for the pool to fill up. It does
// not free live registrations: closing the socket does.
func (c *Conn) Flush() error { return c.freeMR(0, 0) }
