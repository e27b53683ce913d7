//go:build linux

package cli

// The RDMA mode of stress (-rdma write|read).
//
// Each sender task says hello to the receiver with the operation, the
// transfer size and its depth. The receiver answers by registering -depth
// buffers of that size in an rdmaops.Pool, one registration message per
// buffer carrying its cookie (RDS_CMSG_RDMA_DEST) and its index; that is
// the warm-up, and the only registrations of the run. The sender then
// issues RDMA WRITEs into (or READs from) those buffers, each with
// NOTIFY_ME, a barrier token as user_token, and immediate data naming the
// buffer. The receiver takes each immediate data message as "the transfer
// into (out of) buffer i is done", checks the pattern if asked, returns
// the buffer to its pool and grants one back with a credit message; the
// cookie stays the same. The sender's local memory is -depth slots per
// task, each free again when the kernel's completion status for its
// operation arrives.
//
// The receiver bounds what senders can make it register: all streams
// together at most -rdma-max-mem bytes (a hello that would exceed it is
// refused with the reason), and a stream from which no message arrived for
// -rdma-idle has its buffers freed, so a sender that crashed or went quiet
// before its fin pins nothing for long. Both are told to the sender in a
// reject message and logged on the receiver's standard error.

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-rds/rds/barrier"
	"github.com/go-rds/rds/cmsg"
	"github.com/go-rds/rds/rdmaops"
	"github.com/go-rds/rds/rdssock"
)

// Message types of the RDMA mode (the header is stressHdr).
const (
	typeRDMAHello  = 6  // sender → receiver: aux depth; body: op, verify, size
	typeRDMABuf    = 7  // receiver → sender with RDMA_DEST: buffer seq is yours; aux its fill generation
	typeRDMACredit = 8  // receiver → sender: buffer seq (same cookie) is yours again; aux generation
	typeRDMAImm    = 9  // sender → receiver, immediate data: op seq done on buffer aux
	typeRDMAReject = 10 // receiver → sender: no RDMA for you; body: the reason
)

// RDMA operations in the hello.
const (
	rdmaOpWrite = 1
	rdmaOpRead  = 2
)

const (
	helloLen = stressHeader + 8
	// rdmaMemCap bounds the memory one side registers or pins for one
	// run: -tasks × -depth × -rdma-size, each buffer rounded up to pages.
	// It is also the default of the receiver's -rdma-max-mem, the bound
	// over all senders together.
	rdmaMemCap = 256 << 20
	// rdmaMaxDepth is the most buffers a receiver registers for one task.
	rdmaMaxDepth = 4096
)

func pageRound(n int) int {
	ps := os.Getpagesize()
	return (n + ps - 1) &^ (ps - 1)
}

func putHello(b []byte, h stressHdr, op uint8, verify bool, size int) []byte {
	b = b[:helloLen]
	h.put(b)
	b[32], b[33] = op, 0
	if verify {
		b[33] = 1
	}
	b[34], b[35] = 0, 0
	binary.BigEndian.PutUint32(b[36:], uint32(size))
	return b
}

func parseHello(b []byte) (op uint8, verify bool, size int, ok bool) {
	if len(b) < helloLen {
		return 0, false, 0, false
	}
	return b[32], b[33] == 1, int(binary.BigEndian.Uint32(b[36:])), true
}

// checkHello validates a hello's parameters on the receiver; it returns
// the reason to reject it, or "".
func checkHello(op uint8, size, depth int) string {
	switch {
	case op != rdmaOpWrite && op != rdmaOpRead:
		return fmt.Sprintf("unknown RDMA operation %d", op)
	case size < 1 || size > rdmaops.MaxTransfer:
		return fmt.Sprintf("RDMA size %d: want 1 to %d bytes", size, rdmaops.MaxTransfer)
	case depth < 1 || depth > rdmaMaxDepth:
		return fmt.Sprintf("depth %d: want 1 to %d buffers", depth, rdmaMaxDepth)
	case depth*pageRound(size) > rdmaMemCap:
		return fmt.Sprintf("%d buffers of %d bytes exceed the receiver's limit of %d MiB per task", depth, size, rdmaMemCap>>20)
	}
	return ""
}

// ---- data pattern ----

func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// rdmaSeed names the content of one transfer: a WRITE by its operation
// number (kind 'w', a = seq), a READ source buffer by its index and fill
// generation (kind 'r').
func rdmaSeed(run uint32, task uint16, kind byte, a, b uint64) uint64 {
	return mix64(uint64(run)<<32|uint64(task)<<8|uint64(kind)) ^ mix64(a<<24^b^0x6a09e667f3bcc908)
}

const patternStep = 0x9e3779b97f4a7c15

// fillRDMA writes the pattern of seed into b: 64-bit words counting up
// from seed in steps of patternStep, so every word depends on its position.
func fillRDMA(b []byte, seed uint64) {
	w, i := seed, 0
	for ; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], w)
		w += patternStep
	}
	for j := 0; i < len(b); i, j = i+1, j+1 {
		b[i] = byte(w >> (8 * j))
	}
}

// checkRDMA reports whether b holds the pattern of seed.
func checkRDMA(b []byte, seed uint64) bool {
	w, i := seed, 0
	for ; i+8 <= len(b); i += 8 {
		if binary.LittleEndian.Uint64(b[i:]) != w {
			return false
		}
		w += patternStep
	}
	for j := 0; i < len(b); i, j = i+1, j+1 {
		if b[i] != byte(w>>(8*j)) {
			return false
		}
	}
	return true
}

// rdmaTransportError explains that an address does not use RDS/IB.
func rdmaTransportError(ap netip.AddrPort, tr rdssock.Transport) error {
	return fmt.Errorf("%v uses the %v transport: RDMA needs an IB address (RDS_TRANS_IB): %w (give an address on an RDMA device: InfiniBand, RoCE or a Soft-RoCE rxe link)", ap, tr, rdssock.ErrTransportUnavailable)
}

// ---- receiver ----

// rdmaStream is the receiver's state for one sender task in RDMA mode.
type rdmaStream struct {
	port     *recvPort // whose socket the sender's messages come in on
	pool     *rdmaops.Pool
	bytes    int64     // registered while pool is open: buffers × page-rounded size
	seen     bool      // a message came since the idle sweep last looked (rdmaMu)
	quiet    time.Time // when the sweep last found seen set, or the hello (rdmaMu)
	idle     bool      // freed for want of messages
	op       uint8
	size     int
	verify   bool
	gen      uint32 // fill generation of the READ source buffers
	buffers  int
	regs     uint64 // pool registrations, once the pool is closed
	verified uint64
	badData  uint64
	bogus    uint64 // immediate data naming a buffer that was not lent
}

// stressRegistrar registers pool buffers for one sender task: each
// registration is announced by a typeRDMABuf message with the buffer's
// index. For READ tests it first fills the buffer with the pattern the
// sender will check.
type stressRegistrar struct {
	c      *rdmaops.Conn
	to     netip.AddrPort
	hdr    stressHdr
	stride int
	st     *rdmaStream
	mu     sync.Mutex
	mrs    map[cmsg.Cookie]*rdmaops.MR
}

func (g *stressRegistrar) Register(ctx context.Context, s rdmaops.Span, flags cmsg.Flags) (cmsg.Cookie, error) {
	idx := s.Offset() / g.stride
	h := g.hdr
	h.typ, h.seq = typeRDMABuf, uint64(idx)
	if g.st.op == rdmaOpRead {
		g.st.gen++
		h.aux = g.st.gen
		fillRDMA(s.Bytes(), rdmaSeed(h.run, h.task, 'r', uint64(idx), uint64(h.aux)))
	}
	var b [stressHeader]byte
	h.put(b[:])
	mr, err := g.c.Register(ctx, s, flags, g.to, b[:])
	if err != nil {
		return 0, err
	}
	g.mu.Lock()
	g.mrs[mr.Cookie()] = mr
	g.mu.Unlock()
	return mr.Cookie(), nil
}

func (g *stressRegistrar) Deregister(ck cmsg.Cookie, flags cmsg.Flags) error {
	g.mu.Lock()
	mr := g.mrs[ck]
	delete(g.mrs, ck)
	g.mu.Unlock()
	if mr == nil {
		return rdmaops.ErrFreed
	}
	return mr.FreeFlags(flags)
}

// rdmaHello sets up the buffers for a sender task, or tells it why not.
// Only a failure to answer is returned as an error.
func (p *recvPort) rdmaHello(ctx context.Context, e *env, h stressHdr, body []byte, from netip.AddrPort) error {
	r := p.receiver
	r.rdmaMu.Lock()
	defer r.rdmaMu.Unlock()
	key := streamKey{h.run, h.task, from}
	r.mu.Lock()
	_, dup := r.rdma[key]
	r.mu.Unlock()
	if dup {
		return nil
	}
	op, verify, size, ok := parseHello(body)
	reason := "malformed hello"
	if ok {
		reason = checkHello(op, size, int(h.aux))
	}
	if reason == "" {
		if tr, err := p.c.Transport(); err != nil || tr != rdssock.TransportIB {
			reason = fmt.Sprintf("the receiver's address %v uses the %v transport: RDMA needs an IB address (RDS_TRANS_IB)", p.c.LocalAddrPort(), tr)
		}
	}
	st := &rdmaStream{port: p, op: op, size: size, verify: verify, buffers: int(h.aux), quiet: time.Now()}
	reserved := false
	if reason == "" {
		st.bytes = int64(st.buffers) * int64(pageRound(size))
		r.mu.Lock()
		if r.rdmaMaxMem > 0 && r.regBytes+st.bytes > r.rdmaMaxMem {
			reason = fmt.Sprintf("%d buffers of %d bytes (%d bytes registered) would exceed the receiver's limit of %d bytes for all senders (-rdma-max-mem); %d bytes are registered for other sender tasks",
				st.buffers, size, st.bytes, r.rdmaMaxMem, r.regBytes)
		} else {
			r.regBytes += st.bytes
			r.regPeak = max(r.regPeak, r.regBytes)
			reserved = true
		}
		r.mu.Unlock()
	}
	if reason == "" {
		if p.rc == nil {
			p.rc = rdmaops.New(p.c, nil, nil)
		}
		reg := &stressRegistrar{c: p.rc, to: from, hdr: stressHdr{task: h.task, run: h.run}, stride: pageRound(size), st: st, mrs: map[cmsg.Cookie]*rdmaops.MR{}}
		flags := cmsg.Flags(0)
		if op == rdmaOpWrite {
			flags = cmsg.FlagReadWrite
		}
		pool, err := rdmaops.NewPool(ctx, reg, st.buffers, size, flags)
		if err != nil {
			reason = fmt.Sprintf("registering %d buffers of %d bytes failed: %v", st.buffers, size, err)
		} else {
			st.pool = pool
			// Every buffer is lent to the sender: its cookie is out.
			for range st.buffers {
				if pool.TryGet() == nil {
					reason = "the buffer pool came up short"
					break
				}
			}
		}
	}
	if reason != "" {
		r.mu.Lock()
		r.rejected++
		if reserved {
			r.regBytes -= st.bytes
		}
		r.mu.Unlock()
		if st.pool != nil {
			st.pool.Close()
		}
		fmt.Fprintf(r.log, "rdscat stress: refused RDMA to task %d of run %08x from %v: %s\n", h.task, h.run, from, reason)
		msg := make([]byte, stressHeader, stressHeader+len(reason))
		(&stressHdr{typ: typeRDMAReject, task: h.task, run: h.run}).put(msg)
		msg = append(msg, reason...)
		if len(msg) > 4000 {
			msg = msg[:4000]
		}
		return sendRetry(e, p.c, msg, from, 10*time.Second)
	}
	r.mu.Lock()
	r.rdma[key] = st
	total := r.regBytes
	r.mu.Unlock()
	if r.standalone {
		fmt.Fprintf(r.log, "rdscat stress: registered %d buffers of %d bytes for task %d of run %08x from %v: %d bytes, %d bytes registered in all\n",
			st.buffers, size, h.task, h.run, from, st.bytes, total)
	}
	return nil
}

// rdmaImm handles the immediate data of one RDMA operation: the buffer it
// names is done with; check it, return it to the pool and grant one back.
// It returns the operation's stream, or nil if the message belongs to no
// known stream.
func (r *receiver) rdmaImm(e *env, h stressHdr, from netip.AddrPort) (*rdmaStream, error) {
	r.rdmaMu.Lock()
	defer r.rdmaMu.Unlock()
	key := streamKey{h.run, h.task, from}
	st := r.lastRDMA
	if st == nil || !key.is(r.lastRDMAKey) {
		r.mu.Lock()
		st = r.rdma[key]
		r.mu.Unlock()
		if st != nil {
			r.lastRDMAKey, r.lastRDMA = key, st
		}
	}
	if st == nil || st.pool == nil {
		return nil, nil
	}
	st.seen = true
	b := st.pool.Buffer(int(h.aux))
	if b == nil || b.State() != rdmaops.InTransmission {
		r.mu.Lock()
		st.bogus++
		r.mu.Unlock()
		return st, nil
	}
	if !st.verify {
		// Nothing to check: the sender keeps using the buffers it was
		// given, as rds-stress does, and none is handed back.
		return st, nil
	}
	if st.op == rdmaOpWrite {
		if err := b.Landed(); err != nil {
			return st, err
		}
		if st.verify {
			ok := checkRDMA(b.Bytes(), rdmaSeed(h.run, h.task, 'w', h.seq, 0))
			r.mu.Lock()
			if ok {
				st.verified++
			} else {
				st.badData++
			}
			r.mu.Unlock()
		}
	}
	if err := b.Release(); err != nil {
		return st, err
	}
	nb := st.pool.TryGet()
	if nb == nil {
		return st, errors.New("RDMA buffer pool empty after a release")
	}
	c := stressHdr{typ: typeRDMACredit, task: h.task, run: h.run, seq: uint64(nb.Index())}
	if st.op == rdmaOpRead {
		st.gen++
		c.aux = st.gen
		fillRDMA(nb.Bytes(), rdmaSeed(h.run, h.task, 'r', uint64(nb.Index()), uint64(c.aux)))
	}
	var msg [stressHeader]byte
	c.put(msg[:])
	return st, sendRetry(e, st.port.c, msg[:], from, 10*time.Second)
}

// closeRDMA frees the buffers of one stream (its sender is done with
// them), or of all streams when key is nil.
func (r *receiver) closeRDMA(key *streamKey) {
	r.rdmaMu.Lock()
	defer r.rdmaMu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, st := range r.rdma {
		if (key != nil && k != *key) || st.pool == nil {
			continue
		}
		r.freeStream(st)
	}
}

// freeStream closes st's pool and returns its memory to the budget. The
// caller holds rdmaMu and mu.
func (r *receiver) freeStream(st *rdmaStream) {
	st.regs = st.pool.Stats().Registrations
	st.pool.Close()
	st.pool = nil
	r.regBytes -= st.bytes
}

// startIdleSweep starts the goroutine that frees the buffers of streams
// idle for longer than -rdma-idle; the returned function stops it.
func (r *receiver) startIdleSweep(ctx context.Context) (stop func()) {
	if r.rdmaIdle <= 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(min(max(r.rdmaIdle/4, 50*time.Millisecond), time.Second))
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-tick.C:
				r.expireIdle(now)
			}
		}
	}()
	return func() { cancel(); <-done }
}

// expireIdle frees the buffers of every stream that has been silent for
// longer than -rdma-idle, tells its sender (one attempt: the sender may be
// gone), and then logs both.
func (r *receiver) expireIdle(now time.Time) {
	r.rdmaMu.Lock()
	defer r.rdmaMu.Unlock()
	type note struct {
		key   streamKey
		c     *rdssock.Conn
		bytes int64
		quiet time.Duration
	}
	var freed []note
	r.mu.Lock()
	for k, st := range r.rdma {
		if st.pool == nil {
			continue
		}
		if st.seen {
			// Stamped here rather than per message: the quiet time is
			// at most a sweep interval short.
			st.seen, st.quiet = false, now
			continue
		}
		if now.Sub(st.quiet) <= r.rdmaIdle {
			continue
		}
		r.freeStream(st)
		st.idle = true
		r.idleFreed++
		freed = append(freed, note{k, st.port.c, st.bytes, now.Sub(st.quiet)})
	}
	total := r.regBytes
	r.mu.Unlock()
	for _, f := range freed {
		reason := fmt.Sprintf("no message of this task for %v (the receiver's -rdma-idle is %v): its %d registered bytes were freed", f.quiet.Round(time.Millisecond), r.rdmaIdle, f.bytes)
		msg := make([]byte, stressHeader, stressHeader+len(reason))
		(&stressHdr{typ: typeRDMAReject, task: f.key.task, run: f.key.run}).put(msg)
		msg = append(msg, reason...)
		told := "told the sender"
		if _, err := f.c.WriteMsg(msg, nil, f.key.from); err != nil {
			told = fmt.Sprintf("could not tell the sender: %v", err)
		}
		// Logged once the sender was told: a sender that acts before
		// its notice arrives learns it only from failed operations.
		fmt.Fprintf(r.log, "rdscat stress: freed the RDMA buffers of task %d of run %08x from %v: %s; %d bytes registered in all; %s\n", f.key.task, f.key.run, f.key.from, reason, total, told)
	}
}

// rdmaReport sums the RDMA streams; nil if there were none.
func (r *receiver) rdmaReport() *rdmaReceiverReport {
	if len(r.rdma) == 0 && r.rejected == 0 {
		return nil
	}
	rep := &rdmaReceiverReport{Rejected: r.rejected, IdleFreed: r.idleFreed, RegisteredBytes: r.regBytes, PeakBytes: r.regPeak}
	for _, st := range r.rdma {
		rep.Tasks++
		rep.Buffers += uint64(st.buffers)
		regs := st.regs
		if st.pool != nil {
			regs = st.pool.Stats().Registrations
		}
		rep.Registrations += regs
		rep.Verified += st.verified
		rep.VerifyErrors += st.badData
		rep.Bogus += st.bogus
	}
	return rep
}

// rdmaReceiverReport is the receiver's RDMA part of the JSON summary.
type rdmaReceiverReport struct {
	Tasks         int    `json:"tasks"`
	Buffers       uint64 `json:"buffers"`       // registered at warm-up, over all tasks
	Registrations uint64 `json:"registrations"` // all registrations made: equal to buffers when none happened after warm-up
	Verified      uint64 `json:"verified"`      // WRITEs whose landed bytes held the expected pattern
	VerifyErrors  uint64 `json:"verify_errors"` // WRITEs whose landed bytes did not
	Bogus         uint64 `json:"bogus"`         // immediate data naming a buffer not lent out
	Rejected      uint64 `json:"rejected"`      // hellos refused
	IdleFreed     uint64 `json:"idle_freed"`    // streams whose buffers were freed after -rdma-idle without a message
	// RegisteredBytes is the memory registered when the report was made;
	// PeakBytes the most registered at once (both page-rounded).
	RegisteredBytes int64 `json:"registered_bytes"`
	PeakBytes       int64 `json:"peak_registered_bytes"`
}

// ---- sender ----

// rdmaSlot is one local buffer of a sender task and the operation using it.
type rdmaSlot struct {
	slot int
	span [1]rdmaops.Span
	idx  int    // the receiver's buffer
	gen  uint32 // its fill generation (READ)
	seq  uint64
	ts   int64
}

type rdmaCredit struct {
	idx    int
	cookie cmsg.Cookie
	gen    uint32
}

// rdmaTask is a sender task's RDMA state.
type rdmaTask struct {
	rc     *rdmaops.Conn
	region *rdmaops.Region
	slots  []rdmaSlot
	free   freeSlots   // slots released by the kernel
	failed atomic.Bool // an operation failed

	// Owned by the task's goroutine, which reads the socket.
	credits  []rdmaCredit // granted by the receiver, oldest first from credHead
	credHead int
	cookies  map[int]cmsg.Cookie
	rejected string // the receiver's reason, once it refused
	finAck   *stressHdr
	status   [barrier.Unknown + 1]atomic.Uint64

	verified, badData atomic.Uint64
	remoteBad         uint64 // the receiver's verify errors, from its count
}

// freeSlots holds the slots free for an operation. The task's goroutine
// takes them; the tracker's release hook, which runs in that goroutine
// while it reads the socket and in others at Close or a late status, puts
// them back. (A mutex and a slice: a buffered channel cost twice as much
// per operation.)
type freeSlots struct {
	mu  sync.Mutex
	ids []int
}

func (f *freeSlots) put(id int) {
	f.mu.Lock()
	f.ids = append(f.ids, id)
	f.mu.Unlock()
}

// take returns a free slot, if there is one.
func (f *freeSlots) take() (int, bool) {
	f.mu.Lock()
	n := len(f.ids)
	if n == 0 {
		f.mu.Unlock()
		return 0, false
	}
	id := f.ids[n-1]
	f.ids = f.ids[:n-1]
	f.mu.Unlock()
	return id, true
}

// rdmaSenderReport is the sender's RDMA part of the JSON summary.
type rdmaSenderReport struct {
	Op                   string            `json:"op"`
	Size                 int               `json:"size"`
	Verify               bool              `json:"verify"`
	Status               map[string]uint64 `json:"status"`                 // completions by barrier status
	Verified             uint64            `json:"verified"`               // READs whose bytes held the receiver's pattern
	VerifyErrors         uint64            `json:"verify_errors"`          // READs whose bytes did not
	ReceiverVerifyErrors uint64            `json:"receiver_verify_errors"` // WRITEs the receiver found wrong
	Registrations        uint64            `json:"registrations"`          // made by the sender (none expected)
}

func (o *stressOpts) newRDMATask(s *sender, t *senderTask) error {
	stride := pageRound(int(o.rdmaSize))
	region, err := rdmaops.NewRegion(o.depth * stride)
	if err != nil {
		return err
	}
	rt := &rdmaTask{
		region:  region,
		slots:   make([]rdmaSlot, o.depth),
		free:    freeSlots{ids: make([]int, 0, o.depth)},
		cookies: make(map[int]cmsg.Cookie),
		credits: make([]rdmaCredit, 0, 2*o.depth),
	}
	for i := range rt.slots {
		rt.slots[i] = rdmaSlot{slot: i, span: [1]rdmaops.Span{region.Span(i*stride, int(o.rdmaSize))}}
		rt.free.put(i)
	}
	tr := barrier.New(&barrier.Config{
		Timeout:    o.timeout,
		OnComplete: func(c barrier.Completion) { s.rdmaDone(t, c) },
		OnRelease:  func(c barrier.Completion) { t.rdma.rdmaReleased(c) },
	})
	rt.rc = rdmaops.New(t.c, tr, nil)
	t.rdma = rt
	return nil
}

// close cancels what is still in flight (the socket is closed) and
// unmaps the task's memory.
func (rt *rdmaTask) close() {
	rt.rc.Close()
	rt.region.Close()
}

// rdmaDone runs for every completed operation of task t: it counts the
// outcome. The slot is lent again only by rdmaReleased, because after a
// timeout the kernel may still transfer into it.
func (s *sender) rdmaDone(t *senderTask, c barrier.Completion) {
	rt := t.rdma
	sl, ok := c.Keep.(*rdmaSlot)
	if !ok {
		return
	}
	t.n.inflight.Add(^uint64(0))
	switch c.Status {
	case barrier.NotSent: // the sending loop reports it
	case barrier.Success:
		rt.status[c.Status].Add(1)
		// Only Process (the task's reader) delivers successes, so the
		// histogram keeps a single writer.
		t.hist.Record(uint64(max(monoNow()-sl.ts, 0)))
		if s.o.verify && s.o.rdma == "read" {
			if checkRDMA(sl.span[0].Bytes(), rdmaSeed(s.runID, t.id, 'r', uint64(sl.idx), uint64(sl.gen))) {
				rt.verified.Add(1)
			} else {
				rt.badData.Add(1)
			}
		}
		t.acked.Add(1)
	default:
		rt.status[c.Status].Add(1)
		s.errs.Add(1)
		rt.failed.Store(true)
	}
}

// rdmaReleased runs when the kernel can no longer touch an operation's
// slot: at its completion, or for a timed-out one at its late status or
// when the socket closes.
func (rt *rdmaTask) rdmaReleased(c barrier.Completion) {
	if sl, ok := c.Keep.(*rdmaSlot); ok {
		rt.free.put(sl.slot)
	}
}

// runRDMATask is runTask for the RDMA mode, one goroutine per task too:
// it issues an operation whenever it holds a credit and a free slot, reads
// the socket (rdmaops.Conn.ReadMsg) when it needs a credit, and waits for
// the oldest operation (rdmaops.Conn.Wait, which reads the completion
// notices itself) when every slot is busy.
func (s *sender) runRDMATask(ctx, sendCtx context.Context, e *env, t *senderTask) error {
	o := s.o
	if _, err := warmUp(e, &o.sock, t.c, t.dst.Addr(), o.warmup); err != nil {
		return fmt.Errorf("task %d: warm-up ping: %w", t.id, err)
	}
	if tr, err := t.c.Transport(); err != nil || tr != rdssock.TransportIB {
		return rdmaTransportError(t.c.LocalAddrPort(), tr)
	}
	buf := make([]byte, 4096)
	op := uint8(rdmaOpWrite)
	if o.rdma == "read" {
		op = rdmaOpRead
	}
	if done, err := s.rdmaAskBuffers(ctx, e, t, op, buf); done || err != nil {
		return err
	}
	err := s.issueAll(sendCtx, t, op, buf)
	s.markEnd()
	if err != nil && sendCtx.Err() != nil && ctx.Err() == nil {
		err = nil // the duration ended while waiting
	}
	if err == nil {
		err = s.rdmaRefusal(ctx, t, buf)
	}
	if err != nil {
		s.errs.Add(1)
		return fmt.Errorf("task %d: %w", t.id, explain(err, t.dst))
	}
	if ctx.Err() != nil {
		return nil // interrupted
	}
	return s.rdmaSettle(ctx, e, t, buf)
}

// rdmaAskBuffers sends task t's hello and waits up to -timeout for the
// receiver's first buffer or its refusal; done says ctx ended meanwhile.
func (s *sender) rdmaAskBuffers(ctx context.Context, e *env, t *senderTask, op uint8, buf []byte) (done bool, err error) {
	o, rt := s.o, t.rdma
	var hb [helloLen]byte
	hello := putHello(hb[:], stressHdr{typ: typeRDMAHello, task: t.id, run: s.runID, aux: uint32(o.depth)}, op, o.verify, int(o.rdmaSize))
	if err := sendRetry(e, t.c, hello, t.dst, o.timeout); err != nil {
		return false, fmt.Errorf("task %d: hello: %w", t.id, err)
	}
	hctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	for rt.credHead == len(rt.credits) && rt.rejected == "" {
		if err := s.readRDMA(hctx, t, buf); err != nil {
			switch {
			case ctx.Err() != nil:
				return true, nil
			case hctx.Err() != nil:
				return false, timeoutf("task %d: the receiver at %v announced no RDMA buffers within %v (is it rdscat stress -listen on an IB address?)", t.id, t.dst, o.timeout)
			}
			return false, fmt.Errorf("task %d: waiting for the receiver's buffers: %w", t.id, err)
		}
	}
	return false, nil
}

// issueAll issues task t's RDMA operations until -count is reached,
// sendCtx is done, an operation fails or the receiver refuses.
func (s *sender) issueAll(sendCtx context.Context, t *senderTask, op uint8, buf []byte) error {
	o, rt := s.o, t.rdma
	rop := &rdmaops.Op{Write: op == rdmaOpWrite}
	if !rop.Write {
		rop.Flags = cmsg.FlagFence // the receiver refills the buffer when the immediate data arrives
	}
	imm := make([]byte, stressHeader)
	var err error
	for o.count == 0 || t.sent < uint64(o.count) {
		if rt.rejected != "" {
			err = fmt.Errorf("the receiver refused RDMA: %s", rt.rejected)
			break
		}
		if rt.failed.Load() {
			break
		}
		if sendCtx.Err() != nil {
			break
		}
		if rt.credHead == len(rt.credits) {
			if err = s.readRDMA(sendCtx, t, buf); err != nil {
				break
			}
			continue
		}
		slot, ok := rt.free.take()
		if !ok {
			// Every slot is busy: wait for the oldest operation.
			if _, err = rt.rc.Wait(sendCtx, rt.rc.Tracker().HighWater()+1); err != nil {
				break
			}
			continue
		}
		cr := rt.credits[rt.credHead]
		sl := &rt.slots[slot]
		sl.idx, sl.gen, sl.seq = cr.idx, cr.gen, t.sent
		if rop.Write && o.verify {
			fillRDMA(sl.span[0].Bytes(), rdmaSeed(s.runID, t.id, 'w', t.sent, 0))
		}
		sl.ts = monoNow()
		(&stressHdr{typ: typeRDMAImm, task: t.id, run: s.runID, seq: t.sent, ts: sl.ts, aux: uint32(cr.idx)}).put(imm)
		rop.Remote, rop.Local, rop.Payload, rop.Keep = cr.cookie, sl.span[:], imm, sl
		t.n.inflight.Add(1)
		// Do waits out congestion and a full send buffer itself (the
		// socket has Config.WaitCongested). If it fails, the tracker
		// completed the operation as not sent and its slot is free
		// again; the credit is still ours.
		if _, err = rt.rc.Do(sendCtx, t.dst, rop); err != nil {
			break
		}
		if o.verify {
			rt.takeCredit() // the receiver checks the buffer and grants it again
		} else {
			rt.reuseCredit(o.depth)
		}
		t.sent++
		t.n.msgs.Add(1)
		t.n.bytes.Add(uint64(o.rdmaSize))
	}
	return err
}

// rdmaRefusal is, after an operation of task t failed, the receiver's
// refusal if it sent one, else nil.
func (s *sender) rdmaRefusal(ctx context.Context, t *senderTask, buf []byte) error {
	rt := t.rdma
	if !rt.failed.Load() {
		return nil
	}
	// Operations fail when the receiver has freed its buffers
	// (-rdma-idle); its reason, if it sent one, is the news.
	// Completion notices overtake data, so give it a moment.
	wctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	for rt.rejected == "" && s.readRDMA(wctx, t, buf) == nil {
	}
	cancel()
	if rt.rejected != "" {
		return fmt.Errorf("the receiver refused RDMA: %s", rt.rejected)
	}
	return nil
}

// rdmaSettle waits until every operation of task t has completed and
// exchanges counts with the receiver; a failed operation is the error.
func (s *sender) rdmaSettle(ctx context.Context, e *env, t *senderTask, buf []byte) error {
	o, rt := s.o, t.rdma
	// Every operation completes: with a status, or at its deadline.
	wctx, cancel := context.WithTimeout(ctx, o.timeout+5*time.Second)
	werr := rt.rc.WaitAll(wctx, rt.rc.Tracker().Last())
	cancel()
	if werr != nil {
		st := rt.rc.Tracker().Stats()
		return timeoutf("task %d: after %v, %d RDMA operations still pending and %d timed out with their memory still held by the kernel", t.id, o.timeout, rt.rc.Tracker().Outstanding(), st.Quarantined)
	}
	ferr := s.finish(ctx, e, t, t.acked.Load(), func(ctx context.Context) (stressHdr, error) {
		for rt.finAck == nil {
			if err := s.readRDMA(ctx, t, buf); err != nil {
				return stressHdr{}, err
			}
		}
		return *rt.finAck, nil
	})
	if rt.failed.Load() {
		// Failed operations also leave gaps in the receiver's sequence:
		// the failure is the news.
		return fmt.Errorf("task %d: RDMA operations failed: %s", t.id, rt.failures())
	}
	return ferr
}

// failures lists the failed operations by status.
func (rt *rdmaTask) failures() string {
	out := ""
	for st := barrier.Status(0); st <= barrier.Unknown; st++ {
		if n := rt.status[st].Load(); n > 0 && st != barrier.Success {
			if out != "" {
				out += ", "
			}
			out += fmt.Sprintf("%d %v", n, st)
		}
	}
	return out
}

// readRDMA reads one message from the receiver on task t's socket
// (rdmaops.Conn.ReadMsg processes the completion notices on the way) and
// takes what it says: a buffer announcement or a credit, a refusal, or
// the final count. Messages from elsewhere are skipped.
func (s *sender) readRDMA(ctx context.Context, t *senderTask, buf []byte) error {
	rt := t.rdma
	for {
		m, err := rt.rc.ReadMsg(ctx, buf, nil)
		if err != nil {
			if errors.Is(err, rdssock.ErrTruncated) {
				continue
			}
			return err
		}
		if m.N == 0 || m.From != t.dst {
			continue
		}
		var h stressHdr
		if !h.parse(buf[:m.N]) || h.run != s.runID || h.task != t.id {
			continue
		}
		idx := int(h.seq)
		switch h.typ {
		case typeRDMABuf:
			if !m.HasDest || idx >= s.o.depth {
				continue
			}
			rt.cookies[idx] = m.Dest
			rt.credit(rdmaCredit{idx: idx, cookie: m.Dest, gen: h.aux}, s.o.depth)
		case typeRDMACredit:
			ck, ok := rt.cookies[idx]
			if !ok {
				continue
			}
			rt.credit(rdmaCredit{idx: idx, cookie: ck, gen: h.aux}, s.o.depth)
		case typeRDMAReject:
			if rt.rejected == "" {
				rt.rejected = string(buf[stressHeader:m.N])
			}
		case typeFinAck:
			rt.remoteBad = uint64(h.ts)
			rt.finAck = &h
		default:
			continue
		}
		return nil
	}
}

// credit queues a grant; a receiver granting more than twice the depth is
// ignored beyond that.
func (rt *rdmaTask) credit(c rdmaCredit, depth int) {
	if len(rt.credits)-rt.credHead >= 2*depth {
		return
	}
	if rt.credHead > 0 && len(rt.credits) == cap(rt.credits) {
		n := copy(rt.credits, rt.credits[rt.credHead:])
		rt.credits, rt.credHead = rt.credits[:n], 0
	}
	rt.credits = append(rt.credits, c)
}

// reuseCredit moves the oldest credit to the back: without -verify the
// receiver hands nothing back, and the sender cycles through its buffers.
func (rt *rdmaTask) reuseCredit(depth int) {
	c := rt.credits[rt.credHead]
	rt.takeCredit()
	rt.credit(c, depth)
}

// takeCredit drops the oldest credit, which an operation used.
func (rt *rdmaTask) takeCredit() {
	if rt.credHead++; rt.credHead == len(rt.credits) {
		rt.credits, rt.credHead = rt.credits[:0], 0
	}
}

// rdmaReport fills the sender report's RDMA part.
func (s *sender) rdmaReport(rep *senderReport) {
	o := s.o
	rr := &rdmaSenderReport{Op: o.rdma, Size: int(o.rdmaSize), Verify: o.verify, Status: map[string]uint64{}}
	for _, t := range s.tasks {
		rt := t.rdma
		for st := barrier.Status(0); st <= barrier.Unknown; st++ {
			if n := rt.status[st].Load(); n > 0 {
				rr.Status[st.String()] += n
			}
		}
		rr.Verified += rt.verified.Load()
		rr.VerifyErrors += rt.badData.Load()
		rr.ReceiverVerifyErrors += rt.remoteBad
		rr.Registrations += rt.rc.Registrations()
	}
	rep.RDMA = rr
	rep.Mode = "rdma-" + o.rdma
	rep.Size = int(o.rdmaSize)
	rep.CountsMatch = rep.ReceiverCounted == rep.Acked
}

// checkRDMA validates the RDMA flags; none of it needs a socket.
func (o *stressOpts) checkRDMA() error {
	set := map[string]bool{}
	if o.fs != nil {
		o.fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	}
	if (set["rdma-max-mem"] || set["rdma-idle"]) && o.listen == "" {
		return usagef("-rdma-max-mem and -rdma-idle limit an RDMA receiver: give them with -listen")
	}
	if o.rdmaIdle < 0 {
		return usagef("-rdma-idle must not be negative (0: never free an idle sender's buffers)")
	}
	if o.rdma == "" {
		switch {
		case set["rdma-size"]:
			return usagef("-rdma-size needs -rdma write or -rdma read")
		case set["rdma-max-mem"] || set["rdma-idle"]:
			return usagef("-rdma-max-mem and -rdma-idle need -rdma write or -rdma read")
		case o.verify:
			return usagef("-verify checks RDMA transfers: it needs -rdma write or -rdma read")
		}
		return nil
	}
	return o.checkRDMAMode(set)
}

// checkRDMAMode validates -rdma and the flags it cannot go with; set holds
// the flags given.
func (o *stressOpts) checkRDMAMode(set map[string]bool) error {
	stride := pageRound(max(int(o.rdmaSize), 1))
	switch {
	case o.rdma != "write" && o.rdma != "read":
		return usagef("bad -rdma %q: want write or read", o.rdma)
	case set["mode"]:
		return usagef("-rdma replaces -mode: give one of them")
	case set["size"] || set["ack-size"]:
		return usagef("-size and -ack-size are for -mode rr and oneway; the RDMA transfer size is -rdma-size")
	case o.rdmaSize < 1 || o.rdmaSize > rdmaops.MaxTransfer:
		return usagef("-rdma-size %d: want 1 to %d bytes (RDS caps one RDMA operation at 1 MiB)", o.rdmaSize, rdmaops.MaxTransfer)
	case o.depth > rdmaMaxDepth:
		return usagef("-depth %d: RDMA mode registers one buffer per operation in flight, at most %d per task", o.depth, rdmaMaxDepth)
	case o.tasks*o.depth*stride > rdmaMemCap:
		return usagef("-tasks %d × -depth %d × -rdma-size %d needs %d MiB of registered memory on each side; the limit is %d MiB",
			o.tasks, o.depth, o.rdmaSize, (o.tasks*o.depth*stride)>>20, rdmaMemCap>>20)
	case o.sock.transport == "tcp":
		return usagef("-rdma needs an IB address (RDS_TRANS_IB): -transport tcp cannot carry RDMA")
	}
	return nil
}

func printRDMASender(w io.Writer, s *senderReport, r *rdmaSenderReport) {
	fmt.Fprintf(w, "  rdma      %s of %d bytes, %d completed:", r.Op, r.Size, s.Acked)
	names := make([]string, 0, len(r.Status))
	for n := range r.Status {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, " %s %d", n, r.Status[n])
	}
	fmt.Fprintf(w, "; %d registrations by the sender\n", r.Registrations)
	if r.Verify {
		if r.Op == "read" {
			fmt.Fprintf(w, "  verify    %d READs checked, %d wrong\n", r.Verified, r.VerifyErrors)
		} else {
			fmt.Fprintf(w, "  verify    WRITEs checked by the receiver, %d wrong\n", r.ReceiverVerifyErrors)
		}
	}
}
