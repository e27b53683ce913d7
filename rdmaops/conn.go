//go:build linux

package rdmaops

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/go-rds/rds/barrier"
	"github.com/go-rds/rds/cmsg"
	"github.com/go-rds/rds/internal/barrierlink"
	"github.com/go-rds/rds/internal/rdsabi"
	"github.com/go-rds/rds/internal/sendlink"
	"github.com/go-rds/rds/rdssock"
)

// RegMode is how a Conn registers memory.
type RegMode uint8

// Registration modes.
const (
	// RegAuto probes the kernel on the first registration: RDS_GET_MR
	// where it works, RDS_CMSG_RDMA_MAP otherwise.
	RegAuto RegMode = iota
	// RegMap registers with an RDS_CMSG_RDMA_MAP control message, which
	// sends the cookie to the peer in the same message. It works on every
	// kernel with RDS/IB, FRWR adapters (Soft-RoCE) included.
	RegMap
	// RegGetMR registers with the RDS_GET_MR_FOR_DEST socket option and
	// announces the cookie with RDS_CMSG_RDMA_DEST. Current kernels
	// support it only on FMR adapters.
	RegGetMR
)

// String returns the mode's name.
func (m RegMode) String() string {
	switch m {
	case RegAuto:
		return "auto"
	case RegMap:
		return "RDS_CMSG_RDMA_MAP"
	case RegGetMR:
		return "RDS_GET_MR"
	}
	return fmt.Sprintf("RegMode(%d)", uint8(m))
}

// Options configure a Conn. The zero value is usable.
type Options struct {
	// Registration selects the registration mechanism (default RegAuto).
	Registration RegMode

	// MapRetries bounds the retries of a registration that fails with
	// EAGAIN, which the first RDS_CMSG_RDMA_MAP on a connection still
	// being set up can return (default 20); MapBackoff is the first pause
	// between them, doubled up to 16 times that (default 5ms).
	MapRetries int
	MapBackoff time.Duration

	// AllowAtomics enables DoAtomic. Leave it off unless the adapter
	// implements masked atomics: the kernel posts every atomic as a masked
	// one, and Soft-RoCE (rxe) rejects those without reporting it: sendmsg
	// succeeds, no status ever arrives, and no later message on that
	// connection is delivered.
	AllowAtomics bool

	// FailFast makes Do and DoAtomic return at once when the destination
	// is congested (rdssock.ErrCongested) or the send buffer is full
	// (EAGAIN), completing the operation as barrier.NotSent, instead of
	// waiting for room until the operation's deadline or ctx. A server
	// whose one goroutine issues operations for many peers sets it, so
	// that one slow or congested peer cannot stall the others. Register
	// and Announce then fail with ErrCongested too instead of waiting.
	FailFast bool

	// SignalEvery, above 1, asks for a completion status (NOTIFY_ME) on
	// only every SignalEvery-th READ or WRITE to each destination, and on
	// those with Op.Signal; the others complete as barrier.Covered when a
	// later notified operation to the same destination does. The Conn
	// turns RDS_RECVERR on before the first such operation, so that the
	// kernel still reports one it drops. 0 and 1 notify every operation.
	// See "Signaling every Nth operation" in the package documentation.
	SignalEvery int
}

// A Conn issues RDMA registrations and operations on an RDS socket bound to
// an address of an RDMA device (the IB transport), tracking each operation
// with a barrier.Tracker.
//
// Read the socket through the Conn: Wait and WaitAll read the completion
// notices in the waiting goroutine, ReadMsg returns the data messages (see
// "Reading the socket" in the package documentation). A program that reads
// the socket itself must pass the control bytes of every message to
// HandleControl (or Tracker().Process), since RDMA completion notices
// arrive there as 0-byte messages.
type Conn struct {
	c       *rdssock.Conn
	tr      *barrier.Tracker
	ownsTr  bool // New created tr: Close closes it
	opts    Options
	closing atomic.Bool

	mode      atomic.Uint32 // RegMode once resolved
	probeMu   sync.Mutex
	probePage *Region // the page the registration probe registers
	regs      atomic.Uint64
	deregs    atomic.Uint64
	scratch   reusable[scratch]
	records   reusable[opRecord]
	rd        reader

	laneMu   sync.Mutex
	lanes    map[netip.AddrPort]*lane // with SignalEvery > 1
	laneIDs  uint32                   // the last lane id handed out; ids are never reused
	recvErr  sync.Once
	recvErrE error
}

// maxLanes bounds the destinations a Conn keeps signaling state for.
const maxLanes = 4096

// lane is the signaling state of one destination.
type lane struct {
	id     uint32
	unsigs int // operations sent unsignaled since the last notified one
}

// laneKey is the destination as the kernel matches it: the address
// unmapped, the port.
func laneKey(to netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(to.Addr().Unmap(), to.Port())
}

// plan decides whether op to dst is sent with a status request and
// returns its lane. It fails if op cannot be the notified one it must be.
func (c *Conn) plan(to netip.AddrPort, op *Op) (id uint32, notify bool, err error) {
	silent := op.Flags&cmsg.FlagSilent != 0
	if op.Signal && silent {
		return 0, false, fmt.Errorf("%w: a SILENT operation cannot carry the status request (Op.Signal)", ErrBadOp)
	}
	c.recvErr.Do(func() { c.recvErrE = c.c.SetRecvErr(true) })
	if c.recvErrE != nil {
		return 0, false, fmt.Errorf("rdmaops: SignalEvery needs RDS_RECVERR: %w", c.recvErrE)
	}
	k := laneKey(to)
	c.laneMu.Lock()
	l := c.lanes[k]
	if l == nil {
		if c.lanes == nil {
			c.lanes = make(map[netip.AddrPort]*lane)
		}
		if len(c.lanes) >= maxLanes {
			// Forget the destinations whose last operation was
			// notified: nothing of theirs waits for a cover. One seen
			// again starts a new lane.
			for dk, dl := range c.lanes {
				if dl.unsigs == 0 {
					delete(c.lanes, dk)
				}
			}
		}
		c.laneIDs++
		l = &lane{id: c.laneIDs}
		c.lanes[k] = l
	}
	notify = op.Signal || (!silent && l.unsigs+1 >= c.opts.SignalEvery)
	if notify {
		l.unsigs = 0
	} else {
		l.unsigs++
	}
	id = l.id
	c.laneMu.Unlock()
	return id, notify, nil
}

// laneOf returns the lane of dst, 0 if it has none.
func (c *Conn) laneOf(dst netip.AddrPort) uint32 {
	c.laneMu.Lock()
	defer c.laneMu.Unlock()
	if l := c.lanes[laneKey(dst)]; l != nil {
		return l.id
	}
	return 0
}

// New returns a Conn issuing RDMA on c and tracking operations with tr
// (nil: a tracker with default configuration, whose operations time out
// barrier.DefaultTimeout after they are issued unless Op.Deadline says
// otherwise).
func New(c *rdssock.Conn, tr *barrier.Tracker, opts *Options) *Conn {
	owns := tr == nil
	if owns {
		tr = barrier.New(nil)
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.MapRetries <= 0 {
		o.MapRetries = 20
	}
	if o.MapBackoff <= 0 {
		o.MapBackoff = 5 * time.Millisecond
	}
	x := &Conn{c: c, tr: tr, ownsTr: owns, opts: o}
	x.mode.Store(uint32(o.Registration))
	x.rd.init()
	x.scratch.pool.New = func() any { return new(scratch) }
	x.records.pool.New = func() any { return &opRecord{store: &x.records} }
	return x
}

// Close closes the socket and resolves every operation still pending in
// the tracker with status barrier.Canceled, which is what the kernel does
// to them: closing an RDS socket drops its queued messages, cancels their
// RDMA operations, waits for the adapter to finish those it had started,
// and discards the completion notices it had not yet delivered, so no
// status would ever arrive for them. It also releases the quarantined
// operations (timed out, memory held back): see the package documentation.
// Close does not wait for the network; it returns once the socket is
// closed. The tracker is closed too when New created it. A tracker shared
// by several Conns loses the pending operations of all of them, so give
// each Conn its own.
//
// Memory: the kernel drops the socket's registrations. The regions and
// pool buffers of the released operations are free again (Region.Users
// drops). Registrations (MR) keep counting as users of their region until
// MR.Free, which after Close only releases that count (the kernel already
// dropped the key); Region.Close refuses until then.
func (c *Conn) Close() error {
	c.closing.Store(true)
	err := c.c.Close()
	c.tr.CompleteAll(barrier.Canceled)
	if c.ownsTr {
		c.tr.Close()
	}
	c.probeMu.Lock()
	if c.probePage != nil {
		c.probePage.Close() // its key died with the socket
	}
	c.probeMu.Unlock()
	return err
}

// Cancel drops what the socket still has queued for dst
// (RDS_CANCEL_SENT_TO): messages not yet sent and RDMA operations the
// peer has not yet acknowledged. The kernel reports each dropped operation
// with status barrier.Canceled, also one already running on the adapter,
// whose memory it waits for before the call returns; the call runs inside
// Tracker().Cancel, so no operation is released before it returns.
// Operations to dst that had timed out are released when their late
// Canceled status arrives, so the socket must go on being read (Wait,
// ReadMsg). This is how to get back the memory of operations to a peer
// that stopped answering without closing the socket. The socket must be
// bound.
//
// With Options.SignalEvery, the operations to dst sent without a status
// request get none from the kernel: they complete as barrier.Covered when
// the call returns, since the kernel waited for them.
func (c *Conn) Cancel(dst netip.AddrPort) error {
	cancel := func() error { return c.c.CancelSentTo(dst) }
	if id := c.laneOf(dst); id != 0 {
		return barrierlink.CancelLane(c.tr, id, cancel)
	}
	return c.tr.Cancel(cancel)
}

// Socket returns the underlying socket.
func (c *Conn) Socket() *rdssock.Conn { return c.c }

// Tracker returns the tracker of the Conn's operations.
func (c *Conn) Tracker() *barrier.Tracker { return c.tr }

// RegMode returns the registration mechanism in use; RegAuto until the
// first registration probed the kernel.
func (c *Conn) RegMode() RegMode { return RegMode(c.mode.Load()) }

// Registrations returns how many registrations the Conn made, and
// Deregistrations how many it freed.
func (c *Conn) Registrations() uint64   { return c.regs.Load() }
func (c *Conn) Deregistrations() uint64 { return c.deregs.Load() }

// scratch is memory the kernel reads or writes during one sendmsg: the
// rds_iovec array an RDMA_ARGS points to, the cookie word an RDMA_MAP
// writes, and the control buffer. It is heap memory (never a goroutine
// stack, which may move while the call is prepared), pooled, and kept
// alive across the syscall.
type scratch struct {
	iov    [MaxLocal]rdsabi.Iovec
	cookie uint64
	oob    [cmsg.RDMAArgsSpace + cmsg.RDMAMapSpace + cmsg.RDMADestSpace + cmsg.AtomicSpace]byte
}

func (c *Conn) getScratch() *scratch { return c.scratch.get() }

// putScratch gives s back. Its iov is not cleared: it holds plain
// addresses, and each operation writes the entries it hands the kernel.
func (c *Conn) putScratch(s *scratch) {
	s.cookie = 0
	c.scratch.put(s)
}

// reusable keeps released values of a per-operation kind for reuse: the
// last one released in a slot, which a Conn that issues one operation at a
// time takes back with one compare-and-swap, and the others in a sync.Pool
// (whose New the Conn sets). The slot's state, not an atomic pointer,
// says whether it holds a value: an atomic pointer's swap goes through two
// runtime calls (for the garbage collector's write barrier), an integer's
// compiles to one instruction, and the slot is written only by the
// goroutine that moved the state to slotBusy.
type reusable[T any] struct {
	state atomic.Int32 // slotEmpty, slotFull or slotBusy
	spare *T
	pool  sync.Pool
}

const (
	slotEmpty = iota
	slotFull
	slotBusy
)

func (r *reusable[T]) get() *T {
	if r.state.CompareAndSwap(slotFull, slotBusy) {
		x := r.spare
		r.spare = nil
		r.state.Store(slotEmpty)
		return x
	}
	return r.pool.Get().(*T)
}

func (r *reusable[T]) put(x *T) {
	if r.state.CompareAndSwap(slotEmpty, slotBusy) {
		r.spare = x
		r.state.Store(slotFull)
		return
	}
	r.pool.Put(x)
}

// opRecord holds the regions (and pool buffers) an operation uses until
// its tracker releases it.
type opRecord struct {
	regions [MaxLocal]*Region
	bufs    [MaxLocal]*Buffer
	n, nb   int
	store   *reusable[opRecord]
}

// Release implements barrier.Releaser: the kernel is done with the
// operation's memory. It runs under the tracker's lock.
func (r *opRecord) Release(barrier.Completion) {
	for i := 0; i < r.n; i++ {
		r.regions[i].release()
		r.regions[i] = nil
	}
	for i := 0; i < r.nb; i++ {
		r.bufs[i].unhold()
		r.bufs[i] = nil
	}
	r.n, r.nb = 0, 0
	r.store.put(r)
}

// newRecord takes the spans' regions (and pool buffers) as the memory of
// an operation. It fails with ErrBadOp if a region is closed.
func (c *Conn) newRecord(spans ...Span) (*opRecord, error) {
	r := c.records.get()
	for i, s := range spans {
		if !s.r.acquire() {
			r.Release(barrier.Completion{})
			return nil, fmt.Errorf("%w: local range %d is in a closed region", ErrBadOp, i)
		}
		r.regions[r.n] = s.r
		r.n++
		if p := s.r.pool; p != nil {
			if b := p.bufferAt(s.off); b != nil {
				b.hold()
				r.bufs[r.nb] = b
				r.nb++
			}
		}
	}
	return r, nil
}

// Do queues op for the peer at to and returns its token. It returns once
// the kernel accepted the operation; completion comes later: Conn.Wait or
// WaitAll (or the tracker's Completions). The local memory stays
// in use, its region cannot be closed and a pool buffer in it is not lent
// again, until the tracker releases the operation: with its completion,
// or for one that timed out only later (see the package documentation).
//
// Do waits while the socket's send buffer is full, and while the
// destination is congested or the kernel answers EAGAIN, until ctx is done
// or the operation's deadline passes (op.Deadline, else the tracker's
// timeout, when the tracker reports it TimedOut): the caller needs no
// retry loop. A congested destination is waited out in the runtime poller
// on a socket with rdssock.Config.WaitCongested, and polled with short
// pauses otherwise.
// If sendmsg fails for good the operation is completed at once with
// status barrier.NotSent and the error is returned with its token.
func (c *Conn) Do(ctx context.Context, to netip.AddrPort, op *Op) (barrier.Token, error) {
	total, err := op.total()
	if err != nil {
		return 0, err
	}
	rec, err := c.newRecord(op.Local...)
	if err != nil {
		return 0, err
	}
	var tok barrier.Token
	extra := cmsg.FlagNotifyMe
	notify := true
	if c.opts.SignalEvery > 1 {
		id, n, err := c.plan(to, op)
		if err != nil {
			rec.Release(barrier.Completion{})
			return 0, err
		}
		notify = n
		if notify {
			// The status must also mean that the READs it covers have
			// landed: fence the message (a fence waits for earlier
			// READs only).
			extra = cmsg.FlagNotifyMe | cmsg.FlagFence
		} else {
			extra = 0
		}
		tok = barrier.Token(barrierlink.BeginLane(c.tr, op.Deadline, op.Keep, rec, id, !notify))
	} else {
		tok = c.tr.Begin(barrier.Entry{Deadline: op.Deadline, Keep: op.Keep, Release: rec})
	}
	s := c.getScratch()
	b := cmsg.NewBuilder(s.oob[:0])
	if err := encodeRDMA(&b, op, total, &s.iov, uint64(uintptr(unsafe.Pointer(&s.iov[0]))), uint64(tok), extra); err != nil {
		c.tr.Complete(tok, barrier.NotSent)
		c.putScratch(s)
		return tok, err
	}
	oob, _ := b.Finish()
	// One sendmsg first, past rdssock's layers; if the kernel does not
	// take the message then, the full way waits, retries and reports.
	if (ctx == nil || ctx.Err() == nil) && sendlink.Try(unsafe.Pointer(c.c), op.Payload, oob, to) {
		err = nil
	} else {
		err = c.send(ctx, op.Payload, oob, to, tok, op.Deadline, true)
	}
	runtime.KeepAlive(s)
	c.putScratch(s)
	if err != nil {
		c.tr.Complete(tok, barrier.NotSent)
		return tok, err
	}
	if !notify {
		barrierlink.Sent(c.tr, uint64(tok))
	}
	return tok, nil
}

// Write is Do for an RDMA WRITE of local into the peer's registration
// remote at offset off, with payload as immediate data.
func (c *Conn) Write(ctx context.Context, to netip.AddrPort, remote cmsg.Cookie, off uint64, local Span, payload []byte) (barrier.Token, error) {
	var l [1]Span
	l[0] = local
	return c.Do(ctx, to, &Op{Write: true, Remote: remote, RemoteOffset: off, Local: l[:], Payload: payload})
}

// Read is Do for an RDMA READ of the peer's registration remote at offset
// off into local, with payload as immediate data sent once the READ is
// done (FlagFence is set).
func (c *Conn) Read(ctx context.Context, to netip.AddrPort, remote cmsg.Cookie, off uint64, local Span, payload []byte) (barrier.Token, error) {
	var l [1]Span
	l[0] = local
	return c.Do(ctx, to, &Op{Remote: remote, RemoteOffset: off, Local: l[:], Payload: payload, Flags: cmsg.FlagFence})
}

// DoAtomic queues an atomic operation. It fails with ErrAtomicsDisabled
// unless Options.AllowAtomics is set; see that option.
func (c *Conn) DoAtomic(ctx context.Context, to netip.AddrPort, a *Atomic) (barrier.Token, error) {
	if !c.opts.AllowAtomics {
		return 0, ErrAtomicsDisabled
	}
	if a.Result.r == nil {
		return 0, fmt.Errorf("%w: an atomic's Result must be an 8-byte, 8-aligned span", ErrBadOp)
	}
	rec, err := c.newRecord(a.Result)
	if err != nil {
		return 0, err
	}
	s := c.getScratch()
	b := cmsg.NewBuilder(s.oob[:0])
	if err := encodeAtomic(&b, a, 0); err != nil {
		rec.Release(barrier.Completion{})
		c.putScratch(s)
		return 0, err
	}
	tok := c.tr.Begin(barrier.Entry{Deadline: a.Deadline, Keep: a.Keep, Release: rec})
	b.Reset(s.oob[:0])
	encodeAtomic(&b, a, uint64(tok))
	oob, _ := b.Finish()
	err = c.send(ctx, nil, oob, to, tok, a.Deadline, true)
	runtime.KeepAlive(s)
	c.putScratch(s)
	if err != nil {
		c.tr.Complete(tok, barrier.NotSent)
		return tok, err
	}
	return tok, nil
}

// HandleControl processes the control bytes of one received message: it
// resolves the RDMA completion notices in them through the tracker and
// returns the cookie of an RDS_CMSG_RDMA_DEST, if the message carried one
// (the peer announced a registration with it). notices is the number of
// completion notices. It is for programs that read the socket themselves;
// ReadMsg and Wait do this for every message they read.
func (c *Conn) HandleControl(oob []byte) (dest cmsg.Cookie, hasDest bool, notices int, err error) {
	dest, hasDest, notices, _, err = c.handle(oob)
	if err != nil {
		return 0, false, notices, err
	}
	return dest, hasDest, notices, nil
}

func isEAGAIN(err error) bool { return errors.Is(err, syscall.EAGAIN) }

// send sends one message carrying RDMA control data. A full send buffer
// is waited out in the runtime poller (rdssock), and so is a congested
// destination on a socket with rdssock.Config.WaitCongested. Otherwise
// congestion (ErrCongested), and with eagain an EAGAIN with room in the
// send buffer, are retried after a pause growing from 20µs to 1ms until
// ctx is done or the wait must end: at deadline if it is not zero; for an
// operation (tok not 0), once the tracker no longer has it pending (it
// timed out); for a registration (tok 0, deadline zero), the tracker's
// timeout after the first refusal. With Options.FailFast nothing is
// retried and an operation (eagain) does not even wait for room in the
// send buffer.
func (c *Conn) send(ctx context.Context, b, oob []byte, to netip.AddrPort, tok barrier.Token, deadline time.Time, eagain bool) error {
	if c.opts.FailFast {
		flags, sctx := 0, orBackground(ctx)
		if eagain {
			flags, sctx = syscall.MSG_DONTWAIT, context.Background()
		}
		_, err := c.c.WriteMsgContext(sctx, b, oob, to, flags)
		return err
	}
	pause := 20 * time.Microsecond
	for {
		_, err := c.c.WriteMsgContext(orBackground(ctx), b, oob, to, 0)
		if err == nil || !(eagain && isEAGAIN(err) || errors.Is(err, rdssock.ErrCongested)) || c.closing.Load() {
			return err
		}
		now := time.Now()
		if tok == 0 && deadline.IsZero() {
			if d := barrierlink.Timeout(c.tr); d > 0 {
				deadline = now.Add(d)
			}
		}
		if !deadline.IsZero() && !now.Add(pause).Before(deadline) {
			return err
		}
		if tok != 0 && c.tr.Status(tok) != barrier.Pending {
			return err
		}
		if ctx == nil || ctx.Done() == nil {
			time.Sleep(pause)
		} else if serr := sleepCtx(ctx, pause); serr != nil {
			return err
		}
		if pause < time.Millisecond {
			pause *= 2
		}
	}
}

// orBackground returns ctx, or context.Background() for nil: this
// package takes a nil context, rdssock refuses it.
func orBackground(ctx context.Context) context.Context {
	if ctx == nil {
		return context.Background()
	}
	return ctx
}

// sleepCtx waits d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if ctx == nil {
		time.Sleep(d)
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
