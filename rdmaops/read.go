//go:build linux

package rdmaops

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/go-rds/rds/barrier"
	"github.com/go-rds/rds/cmsg"
	"github.com/go-rds/rds/internal/barrierlink"
	"github.com/go-rds/rds/internal/rdsabi"
	"github.com/go-rds/rds/rdssock"
	"golang.org/x/sys/unix"
)

// Backlog is how many data messages Wait and WaitAll keep for ReadMsg
// when they read one while waiting for completions.
const Backlog = 16

// ctlSpace is the control buffer the Conn reads with when the caller gives
// none: room for 64 completion notices per receive.
const ctlSpace = 64 * cmsg.RDMAStatusSpace

// Msg describes a message ReadMsg returned.
type Msg struct {
	N     int            // bytes of data in b
	OOBN  int            // bytes of control data in oob
	Flags int            // recvmsg flags (MSG_TRUNC, MSG_CTRUNC)
	From  netip.AddrPort // the sender

	// Dest is the registration the sender announced with the message
	// (RDS_CMSG_RDMA_DEST), if HasDest.
	Dest    cmsg.Cookie
	HasDest bool
}

// reader is the Conn's receive side: one goroutine at a time reads the
// socket through the Conn (ReadMsg, or a waiter in Wait/WaitAll).
//
// The role is a flag taken with a compare-and-swap, so that a goroutine
// that reads call after call pays two atomic operations for it. One that
// finds it taken counts itself in queued and waits for a token on freed,
// which release sends when it sees someone queued: as queued is counted
// before the last try and release clears the flag before it looks, either
// that try succeeds or the token comes.
type reader struct {
	busy    atomic.Bool   // a goroutine holds the reading role
	queued  atomic.Int32  // goroutines waiting for the role
	freed   chan struct{} // a token once the role was let go with goroutines queued
	drained chan struct{} // signaled when ReadMsg took a data message
	// drainedSet is set when a token is left on drained, and cleared by
	// the waiter that takes it: a data message reads the flag, where
	// len(drained) is a runtime call.
	drainedSet atomic.Bool
	want       atomic.Int32 // ReadMsg calls waiting for the role
	ctl        [ctlSpace]byte
	// A waiter set the socket's read deadline to dl (on
	// barrierlink.Clock). It stays set after the wait: operations
	// complete in order and their deadlines grow, so one set deadline
	// serves many waits, and when it passes early the reader finds
	// nothing expired and moves it on.
	// Setting it costs a runtime timer update per call.
	dlSet bool
	dl    int64

	// Messages a waiter read, for ReadMsg, in order.
	backlog [Backlog]kept
	bhead   int
	blen    int
}

// kept is a data message a waiter read.
type kept struct {
	data []byte
	n    int
	oob  [cmsg.MaxReceiveSpace]byte
	oobn int
	m    Msg
}

func (r *reader) init() {
	r.freed = make(chan struct{}, 1)
	r.drained = make(chan struct{}, 1)
}

// tryRead takes the reading role if nobody holds it.
func (c *Conn) tryRead() bool { return c.rd.busy.CompareAndSwap(false, true) }

func (c *Conn) wantAdd(d int32) { c.rd.want.Add(d) }
func (c *Conn) wantLoad() int32 { return c.rd.want.Load() }

func (c *Conn) setDeadline(dl int64) {
	c.rd.dlSet, c.rd.dl = true, dl
	c.c.SetReadDeadline(barrierlink.ClockTime(dl))
}

// ownDeadlinePassed handles a read that ended with err: if the read
// deadline a waiter set passed (and not ctx's), it lets the tracker expire
// what is due, clears the deadline, and reports that the read should be
// tried again.
func (c *Conn) ownDeadlinePassed(ctx context.Context, err error) bool {
	r := &c.rd
	if !r.dlSet || !errors.Is(err, os.ErrDeadlineExceeded) || (ctx != nil && ctx.Err() != nil) {
		return false
	}
	barrierlink.Expire(c.tr)
	r.dlSet = false
	c.c.SetReadDeadline(time.Time{})
	return true
}

// awaitRead waits for the reading role for ReadMsg (counted in want, so
// that a waiter holding it gives way) until ctx (which may be nil) is
// done; it reports whether it got it.
func (c *Conn) awaitRead(ctx context.Context) bool {
	var done <-chan struct{}
	if ctx != nil {
		done = ctx.Done()
	}
	c.wantAdd(1)
	defer c.wantAdd(-1)
	c.rd.queued.Add(1)
	defer c.rd.queued.Add(-1)
	for !c.tryRead() {
		select {
		case <-c.rd.freed:
		case <-done:
			return false
		}
	}
	return true
}

// release lets go of the reading role and, if someone waits for it,
// leaves a token on freed.
func (c *Conn) release() {
	c.rd.busy.Store(false)
	if c.rd.queued.Load() > 0 {
		select {
		case c.rd.freed <- struct{}{}:
		default: // a token is there already
		}
	}
}

// ReadMsg receives the next message with data or with a sender into b,
// and its control data into oob. It processes the control data of every
// message it reads: RDMA completion notices go to the tracker, and an
// announced registration (RDS_CMSG_RDMA_DEST) is returned in Msg.Dest.
// Notices, which arrive as 0-byte messages without a sender, are consumed
// and not returned, unless oob is not nil and the message carries other
// control data too (a congestion update with rdssock.Config.
// CongestionMonitor, a zero-copy completion). oob may be nil; a given oob
// should have room for cmsg.MaxReceiveSpace plus the completion notices
// expected at once (cmsg.RDMAStatusSpace each).
//
// Messages that a Wait or WaitAll read while waiting come first, in order.
// ReadMsg waits while a waiter reads the socket; the waiter gives way once
// a data message arrives. A message longer than b returns what fit with
// an error for which errors.Is(err, rdssock.ErrTruncated) holds.
//
// ReadMsg gives up when ctx is done (ctx may be nil). context.Background
// and nil cost nothing, and neither does a context that can be canceled
// once the socket has seen it on a few calls; one made for each call
// (context.WithTimeout around every read) allocates each time.
func (c *Conn) ReadMsg(ctx context.Context, b, oob []byte) (m Msg, err error) {
	if !c.tryRead() && !c.awaitRead(ctx) {
		return Msg{}, ctx.Err()
	}
	err = c.readMsgLocked(ctx, b, oob, &m)
	c.release()
	return m, err
}

// readMsgLocked is ReadMsg for the holder of the reading role: it fills
// in *mp (the caller's result, so that the large value is not copied
// back).
func (c *Conn) readMsgLocked(ctx context.Context, b, oob []byte, mp *Msg) error {
	r := &c.rd
	for r.blen > 0 && oob == nil && r.backlog[r.bhead].n == 0 && !r.backlog[r.bhead].m.From.IsValid() {
		r.bhead = (r.bhead + 1) % Backlog // control data nobody asked for
		r.blen--
	}
	if r.blen > 0 {
		k := &r.backlog[r.bhead]
		r.bhead = (r.bhead + 1) % Backlog
		r.blen--
		m := k.m
		m.N = copy(b, k.data[:k.n])
		m.OOBN = 0
		if len(oob) >= k.oobn {
			m.OOBN = copy(oob, k.oob[:k.oobn])
		} else if k.oobn > 0 {
			m.Flags |= unix.MSG_CTRUNC
		}
		c.signalDrained()
		if m.N < k.n {
			m.Flags |= unix.MSG_TRUNC
		}
		*mp = m
		if m.Flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0 {
			return fmt.Errorf("rdmaops: message kept by Wait: %w", rdssock.ErrTruncated)
		}
		return nil
	}
	ctl := oob
	if ctl == nil {
		ctl = r.ctl[:]
	}
	for {
		n, oobn, flags, from, err := c.c.ReadMsgContext(orBackground(ctx), b, ctl, 0)
		if err != nil && flags == 0 {
			if c.ownDeadlinePassed(ctx, err) {
				continue
			}
			return err
		}
		dest, has, _, other, perr := c.handle(ctl[:oobn])
		if perr != nil && err == nil {
			err = perr
		}
		if n == 0 && !from.IsValid() && flags&unix.MSG_TRUNC == 0 && err == nil && (oob == nil || !other) {
			continue // completion notices only
		}
		if n > 0 || from.IsValid() {
			c.signalDrained()
		}
		*mp = Msg{N: n, Flags: flags, From: from, Dest: dest, HasDest: has}
		if oob != nil {
			mp.OOBN = oobn
		}
		return err
	}
}

// handle processes one message's control data in one walk: it resolves
// completion notices as Tracker.Process does (stopping at the first
// malformed one) and returns an announced cookie; other reports control
// messages of other kinds.
func (c *Conn) handle(oob []byte) (dest cmsg.Cookie, hasDest bool, notices int, other bool, err error) {
	if len(oob) == 0 {
		return // a data message alone
	}
	notices, used := c.headNotices(oob)
	if used == len(oob) {
		return 0, false, notices, false, nil
	}
	p := cmsg.NewParser(oob)
	for range notices {
		p.Next() // resolved already; the parser's errors keep their offsets
	}
	for {
		m, perr := p.Next()
		if perr != nil {
			// Past io.EOF, Next's errors are *cmsg.Error: a type check
			// costs less than comparing with io.EOF, a runtime call.
			if _, bad := perr.(*cmsg.Error); bad && err == nil {
				err = perr
			}
			return dest, hasDest, notices, other, err
		}
		switch {
		case m.Is(cmsg.LevelRDS, cmsg.TypeRDMAStatus):
			if err != nil {
				continue // Process stops at a malformed notice
			}
			st, serr := m.RDMAStatus()
			if serr != nil {
				err = serr
				continue
			}
			notices++
			c.tr.Complete(barrier.Token(st.UserToken), barrier.FromKernel(int32(st.Status)))
		case m.Is(cmsg.LevelRDS, cmsg.TypeRDMADest):
			if ck, derr := m.RDMADest(); derr == nil {
				dest, hasDest = ck, true
			}
		default:
			other = true
		}
	}
}

// headNotices resolves the completion notices at the head of oob as
// handle does, reading each well-formed RDS_CMSG_RDMA_STATUS message in
// place, where a cmsg.Parser walk and decode cost about 200 instructions a
// notice (integration/cmd/rdsinstr). It returns how many it resolved and
// the bytes they took; handle parses the rest, if any.
func (c *Conn) headNotices(oob []byte) (notices, used int) {
	const (
		msgLen    = cmsg.HeaderLen + rdsabi.SizeofRDMANotify // cmsg_len of a notice
		space     = cmsg.RDMAStatusSpace
		levelOff  = cmsg.HeaderLen - 8 // cmsg_level, then cmsg_type
		tokenOff  = cmsg.HeaderLen + int(unsafe.Offsetof(rdsabi.RDMANotify{}.UserToken))
		statusOff = cmsg.HeaderLen + int(unsafe.Offsetof(rdsabi.RDMANotify{}.Status))
	)
	for len(oob)-used >= msgLen {
		m := oob[used : used+msgLen]
		var n uint64
		if cmsg.HeaderLen == 16 {
			n = binary.NativeEndian.Uint64(m)
		} else {
			n = uint64(binary.NativeEndian.Uint32(m))
		}
		if n != msgLen || int32(binary.NativeEndian.Uint32(m[levelOff:])) != cmsg.LevelRDS ||
			int32(binary.NativeEndian.Uint32(m[levelOff+4:])) != cmsg.TypeRDMAStatus {
			break
		}
		tok := binary.NativeEndian.Uint64(m[tokenOff:])
		st := int32(binary.NativeEndian.Uint32(m[statusOff:]))
		c.tr.Complete(barrier.Token(tok), barrier.FromKernel(st))
		notices++
		used = min(used+space, len(oob))
	}
	return notices, used
}

// signalDrained leaves a token on drained for a waiter that waits for a
// data message to be taken, unless one is there already.
func (c *Conn) signalDrained() {
	if !c.rd.drainedSet.Load() {
		c.sendDrained()
	}
}

func (c *Conn) sendDrained() {
	c.rd.drainedSet.Store(true)
	select {
	case c.rd.drained <- struct{}{}:
	default:
	}
}

// Wait returns the status of operation tok once it is complete, or
// ctx.Err() when ctx is done first (ctx may be nil). The status of a
// failed operation is not an error; barrier.ErrUnknownToken is, for a
// token the tracker did not issue or no longer remembers.
//
// While no other goroutine reads the socket through the Conn, Wait reads
// it itself and processes the completion notices, so the completion is
// consumed in the goroutine that waits for it, with no hand-off. A data
// message it meets stays the application's: Wait keeps up to Backlog of
// them for ReadMsg, and gives way to a ReadMsg call that waits. While
// another goroutine reads (ReadMsg, or another waiter), Wait waits for the
// tracker, and takes over reading when that goroutine stops. Wait uses the
// socket's read deadline to wake at the earliest operation deadline, and
// may leave it set (ReadMsg knows): do not set one of your own on the
// socket of a Conn (give ReadMsg a context instead).
//
// Wait allocates nothing while it reads the socket itself with a context
// that cannot be canceled.
func (c *Conn) Wait(ctx context.Context, tok barrier.Token) (barrier.Status, error) {
	if barrierlink.Unsealed(c.tr, uint64(tok), false) {
		return barrier.Pending, barrier.ErrUnsealed
	}
	if err := c.wait(ctx, uint64(tok), false); err != nil {
		if s := c.tr.Status(tok); s.Done() {
			return s, nil
		}
		return c.tr.Status(tok), err
	}
	s := c.tr.Status(tok)
	if s == barrier.Unknown {
		return s, barrier.ErrUnknownToken
	}
	return s, nil
}

// WaitAll waits until every operation with a token at most upTo is
// complete and released (Tracker().HighWater() >= upTo), reading the
// socket as Wait does. upTo must have been issued: WaitAll(ctx,
// c.Tracker().Last()) waits for every operation begun so far.
func (c *Conn) WaitAll(ctx context.Context, upTo barrier.Token) error {
	if upTo > c.tr.Last() {
		return barrier.ErrUnknownToken
	}
	if c.tr.HighWater() < upTo && barrierlink.Unsealed(c.tr, uint64(upTo), true) {
		return barrier.ErrUnsealed
	}
	err := c.wait(ctx, uint64(upTo), true)
	if err != nil && c.tr.HighWater() >= upTo {
		return nil
	}
	return err
}

func (c *Conn) wait(ctx context.Context, tok uint64, all bool) error {
	dataWait := false // a data message is waiting for ReadMsg
	pause := 10 * time.Microsecond
	for {
		if dataWait || !c.tryRead() {
			got, over, err := c.waitTurn(ctx, tok, all, dataWait, &pause)
			if over {
				return err
			}
			if !got {
				dataWait = false
				continue
			}
		}
		ok, dw, err := c.pollLocked(ctx, tok, all)
		c.release()
		if ok || err != nil {
			return err
		}
		dataWait = dw
	}
}

// waitTurn is how a Wait waits while it does not read the socket: someone
// else reads, or a data message waits for ReadMsg (dataWait). It returns
// when the wait is over (over, with ctx's error if ctx ended), when it took
// the reading role (got), or when the message was taken or it is time to
// look for notices again (neither).
func (c *Conn) waitTurn(ctx context.Context, tok uint64, all, dataWait bool, pause *time.Duration) (got, over bool, err error) {
	ch, w, ok := barrierlink.Watch(c.tr, tok, all)
	if ok {
		return false, true, nil
	}
	defer barrierlink.Unwatch(c.tr, w)
	var done <-chan struct{}
	if ctx != nil {
		done = ctx.Done()
	}
	freed, drained := c.rd.freed, c.rd.drained
	var repoll <-chan time.Time
	if dataWait {
		freed = nil
		if c.wantLoad() == 0 {
			// The backlog is full and nobody reads: look for notices,
			// which the kernel hands out ahead of the data, every so
			// often. (An unstopped timer is collected once unreachable.)
			*pause = min(2**pause, time.Millisecond)
			repoll = time.NewTimer(*pause).C
		}
	} else {
		drained = nil
		c.rd.queued.Add(1)
		defer c.rd.queued.Add(-1)
		if c.tryRead() {
			return true, false, nil // let go of while this one got ready
		}
	}
	select {
	case <-ch:
		return false, true, nil
	case <-freed:
		return c.tryRead(), false, nil // or someone else took it first
	case <-done:
		return false, true, ctx.Err()
	case <-repoll:
	case <-drained:
		c.rd.drainedSet.Store(false) // before the caller looks again
	}
	return false, false, nil
}

// pollLocked reads the socket, holding the reading role, until the wait
// is satisfied (done) or a data message must be left for ReadMsg
// (dataWait).
func (c *Conn) pollLocked(ctx context.Context, tok uint64, all bool) (done, dataWait bool, err error) {
	r := &c.rd
	for {
		ok, dl := barrierlink.Poll(c.tr, tok, all)
		if ok {
			return true, false, nil
		}
		// A deadline already set that is earlier than needed only wakes
		// the reader early (see reader.dlSet).
		if dl != 0 && (!r.dlSet || dl < r.dl) {
			c.setDeadline(dl)
		}
		// Peek: the kernel hands out (and consumes) completion notices
		// before any data, and leaves a data message queued.
		n, oobn, flags, from, rerr := c.c.ReadMsgContext(orBackground(ctx), nil, r.ctl[:], unix.MSG_PEEK|unix.MSG_TRUNC)
		if rerr != nil && flags == 0 {
			if c.ownDeadlinePassed(ctx, rerr) {
				continue
			}
			return false, false, rerr
		}
		if n == 0 && !from.IsValid() && flags&unix.MSG_TRUNC == 0 {
			if _, _, _, other, _ := c.handle(r.ctl[:oobn]); other && r.blen < Backlog && oobn <= cmsg.MaxReceiveSpace {
				// Other control data (a congestion update the
				// application asked for), consumed with the peek:
				// kept for ReadMsg.
				k := &r.backlog[(r.bhead+r.blen)%Backlog]
				k.n, k.oobn = 0, copy(k.oob[:], r.ctl[:oobn])
				k.m = Msg{Flags: flags}
				r.blen++
			}
			continue
		}
		// A data message heads the queue.
		if c.wantLoad() > 0 || r.blen == Backlog {
			return false, true, nil
		}
		if err := c.keep(n); err != nil {
			return false, false, err
		}
	}
}

// keep receives the data message at the head of the queue, n bytes long,
// into the backlog.
func (c *Conn) keep(n int) error {
	r := &c.rd
	k := &r.backlog[(r.bhead+r.blen)%Backlog]
	if cap(k.data) < n {
		k.data = make([]byte, n)
	}
	k.data = k.data[:cap(k.data)]
	got, oobn, flags, from, err := c.c.ReadMsgContext(context.Background(), k.data, k.oob[:], 0)
	if err != nil && flags == 0 {
		return err
	}
	dest, has, _, _, _ := c.handle(k.oob[:oobn])
	k.n, k.oobn = got, oobn
	k.m = Msg{Flags: flags, From: from, Dest: dest, HasDest: has}
	r.blen++
	return nil
}
