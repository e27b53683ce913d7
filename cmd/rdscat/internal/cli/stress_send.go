//go:build linux

package cli

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/go-rds/rds/cmd/rdscat/internal/hist"
	"github.com/go-rds/rds/rdssock"
)

// The sending end of rdscat stress (-to): one goroutine and one socket per
// task, each sending and reading its own answers (RDMA tasks:
// stress_rdma.go).

// senderTask is one sender socket and what its goroutine counted.
type senderTask struct {
	id      uint16
	c       *rdssock.Conn
	dst     netip.AddrPort  // the receiver's port for this task (-ports)
	hist    *hist.Histogram // written by the task's goroutine only
	sent    uint64
	acked   atomic.Uint64
	counted uint64
	rdma    *rdmaTask // RDMA mode
	n       flowCount // this task's share of the sender's counters
}

type sender struct {
	o     *stressOpts
	dst   netip.AddrPort
	runID uint32
	tasks []*senderTask
	start time.Time
	end   atomic.Int64 // UnixNano when the last task stopped sending

	errs atomic.Uint64
}

// flowCount is what one goroutine (a sender task, a receiver port) has
// counted, message by message, in counters of its own: counters that every
// task updated for every message would pass one cache line between the
// CPUs per message. The live line and the report add them up (sumFlows).
type flowCount struct {
	msgs, bytes, acks, inflight atomic.Uint64
	_                           [32]byte // the rest of a 64-byte line
}

// sumFlows adds up the counts of the flows of,
// in the order msgs, bytes, acks, in flight.
func sumFlows[T any](of []T, count func(T) *flowCount) (msgs, bytes, acks, inflight uint64) {
	for _, x := range of {
		n := count(x)
		msgs += n.msgs.Load()
		bytes += n.bytes.Load()
		acks += n.acks.Load()
		inflight += n.inflight.Load()
	}
	return msgs, bytes, acks, inflight
}

// totals adds up the tasks' counters.
func (s *sender) totals() (msgs, bytes, inflight uint64) {
	msgs, bytes, _, inflight = sumFlows(s.tasks, func(t *senderTask) *flowCount { return &t.n })
	return msgs, bytes, inflight
}

// defaultSendRoom is what RDS lets a socket queue with the kernel's default
// send buffer: half of net.core.wmem_default (212992 bytes on Linux;
// rds_sk_sndbuf in net/rds/af_rds.c). Setting SO_SNDBUF to n gives n.
const defaultSendRoom = 212992 / 2

// taskDest is where task i sends: the receiver's port plus i modulo its
// number of ports (-ports).
func taskDest(dst netip.AddrPort, i, ports int) netip.AddrPort {
	return netip.AddrPortFrom(dst.Addr(), dst.Port()+uint16(i%max(ports, 1)))
}

func (o *stressOpts) newSender(dst netip.AddrPort) (*sender, error) {
	var src netip.Addr
	var err error
	if o.from != "" {
		if src, err = parseAddr("-from address", o.from); err != nil {
			return nil, err
		}
	} else if src, err = o.sock.sourceFor(dst.Addr()); err != nil {
		return nil, err
	}
	if src.Is4() != dst.Addr().Is4() {
		return nil, usagef("source %v and destination %v are not the same IP version", src, dst.Addr())
	}
	s := &sender{o: o, dst: dst, runID: rand.Uint32()}
	big := max(int(o.size), int(o.ackSize))
	for i := range o.tasks {
		c, err := o.sock.listen(netip.AddrPortFrom(src, 0), func(cfg *rdssock.Config) {
			// Room for every request in flight, but never less than
			// the kernel's default: a smaller buffer only makes the
			// sender wait (it held two 4 KiB messages of -mode oneway).
			if need := max(bufferFor(big), 2*o.depth*int(o.size)); cfg.SendBuffer == 0 && need > defaultSendRoom {
				cfg.SendBuffer = need
			}
			// Room for every answer in flight (rr): a task reads none
			// while its send waits for a congested receiver, and the
			// receiver must not wait for this port meanwhile.
			if need := max(2*o.depth*int(o.ackSize), 4*big); cfg.ReceiveBuffer == 0 && need > 256<<10 {
				cfg.ReceiveBuffer = need
			}
			cfg.ForceBuffers = cfg.ForceBuffers || isRoot()
		})
		if err != nil {
			s.close()
			return nil, err
		}
		t := &senderTask{id: uint16(i), c: c, dst: taskDest(dst, i, o.ports), hist: hist.New(7)}
		s.tasks = append(s.tasks, t)
		if o.rdma != "" {
			if err := o.newRDMATask(s, t); err != nil {
				s.close()
				return nil, err
			}
		}
	}
	return s, nil
}

// congestedSends is how many of the tasks' sends found the receiver's port
// congested (and waited).
func (s *sender) congestedSends() uint64 {
	var n uint64
	for _, t := range s.tasks {
		n += t.c.CongestedSends()
	}
	return n
}

func (s *sender) close() {
	for _, t := range s.tasks {
		t.c.Close()
		if t.rdma != nil {
			t.rdma.close()
		}
	}
}

func (s *sender) run(ctx context.Context, e *env) error {
	s.start = time.Now()
	sendCtx := ctx
	if s.o.duration > 0 {
		var cancel context.CancelFunc
		sendCtx, cancel = context.WithTimeout(ctx, s.o.duration)
		defer cancel()
	}
	errc := make(chan error, len(s.tasks))
	for _, t := range s.tasks {
		if t.rdma != nil {
			go func() { errc <- s.runRDMATask(ctx, sendCtx, e, t) }()
			continue
		}
		go func() { errc <- s.runTask(ctx, sendCtx, e, t) }()
	}
	var first error
	for range s.tasks {
		if err := <-errc; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// runTask is one task of the sender: a single goroutine that sends until
// -depth requests are unanswered (rr), then reads one answer, and so on,
// the way a C program's poll loop does; in oneway mode it only sends. The
// answers and the receiver's final count are read by this goroutine too,
// so no message is handed between goroutines.
func (s *sender) runTask(ctx, sendCtx context.Context, e *env, t *senderTask) error {
	o := s.o
	if _, err := warmUp(e, &o.sock, t.c, t.dst.Addr(), o.warmup); err != nil {
		return fmt.Errorf("task %d: warm-up ping: %w", t.id, err)
	}
	unanswered, err := s.sendAll(sendCtx, t)
	s.markEnd()
	if err != nil && sendCtx.Err() != nil && ctx.Err() == nil {
		err = nil // the duration ended while waiting
	}
	if err != nil {
		s.errs.Add(1)
		return fmt.Errorf("task %d: %w", t.id, err)
	}
	if ctx.Err() != nil {
		return nil // interrupted
	}
	buf := make([]byte, maxMessage+1)
	if err := s.awaitAnswers(ctx, t, buf, unanswered); err != nil {
		return err
	}
	return s.finish(ctx, e, t, t.sent, func(ctx context.Context) (stressHdr, error) {
		return s.readTask(ctx, t, buf, typeFinAck)
	})
}

// sendAll sends task t's messages until -count is reached or sendCtx is
// done; in rr mode it reads answers whenever -depth requests are
// unanswered. It returns how many still are.
func (s *sender) sendAll(sendCtx context.Context, t *senderTask) (unanswered int, err error) {
	o := s.o
	rr := o.mode == "rr"
	msg := make([]byte, o.size)
	for i := range msg[stressHeader:] {
		msg[stressHeader+i] = byte(i)
	}
	typ := uint8(typeData)
	var answers []rdssock.Message
	if rr {
		typ = typeReq
		answers = newAnswerBatch(min(o.depth, 16))
	}
	for o.count == 0 || t.sent < uint64(o.count) {
		if rr && unanswered == o.depth {
			var got int
			if got, err = s.readAnswers(sendCtx, t, answers); err != nil {
				break
			}
			unanswered -= got
			continue
		}
		if sendCtx.Err() != nil {
			break
		}
		h := stressHdr{typ: typ, task: t.id, run: s.runID, seq: t.sent, ts: monoNow(), aux: uint32(o.ackSize)}
		h.put(msg)
		if err = sendWait(sendCtx, t.c, msg, t.dst, 0); err != nil {
			break
		}
		t.sent++
		t.n.msgs.Add(1)
		t.n.bytes.Add(uint64(len(msg)))
		if rr {
			unanswered++
			t.n.inflight.Add(1)
		}
	}
	return unanswered, err
}

// awaitAnswers waits up to -timeout for the unanswered requests' answers.
func (s *sender) awaitAnswers(ctx context.Context, t *senderTask, buf []byte, unanswered int) error {
	wctx, cancel := context.WithTimeout(ctx, s.o.timeout)
	defer cancel()
	for ; unanswered > 0; unanswered-- {
		if _, err := s.readTask(wctx, t, buf, typeAck); err != nil {
			if wctx.Err() != nil && ctx.Err() == nil {
				return timeoutf("task %d: %d requests unanswered after %v", t.id, unanswered, s.o.timeout)
			}
			return fmt.Errorf("task %d: waiting for answers: %w", t.id, err)
		}
	}
	return nil
}

// finish tells the receiver that task t is done after sent messages, and
// waits for its count, which readFin reads.
func (s *sender) finish(ctx context.Context, e *env, t *senderTask, sent uint64, readFin func(context.Context) (stressHdr, error)) error {
	o := s.o
	fin := make([]byte, stressHeader)
	h := stressHdr{typ: typeFin, task: t.id, run: s.runID, seq: sent, aux: uint32(len(s.tasks))}
	h.put(fin)
	if err := sendRetry(e, t.c, fin, t.dst, o.timeout); err != nil {
		return fmt.Errorf("task %d: send count: %w", t.id, err)
	}
	wctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	a, err := readFin(wctx)
	switch {
	case ctx.Err() != nil:
		return nil
	case wctx.Err() != nil:
		return timeoutf("task %d: the receiver did not report its count within %v", t.id, o.timeout)
	case err != nil:
		return fmt.Errorf("task %d: waiting for the receiver's count: %w", t.id, err)
	}
	t.counted = a.seq
	if a.aux != 0 {
		return fmt.Errorf("task %d: the receiver saw %d messages out of sequence", t.id, a.aux)
	}
	return nil
}

// newAnswerBatch returns n messages for readAnswers, each with room for a
// stress header: the rest of an answer is not needed, and a truncated
// message is no error in a batch.
func newAnswerBatch(n int) []rdssock.Message {
	ms := make([]rdssock.Message, n)
	bufs := make([]byte, n*stressHeader)
	for i := range ms {
		ms[i].Buffer = bufs[i*stressHeader : (i+1)*stressHeader]
	}
	return ms
}

// readAnswers waits for answers to task t's requests and takes every one
// already queued, with one recvmmsg; it returns how many it counted.
func (s *sender) readAnswers(ctx context.Context, t *senderTask, ms []rdssock.Message) (int, error) {
	for {
		n, err := t.c.ReadBatch(ctx, ms, 0)
		if err != nil {
			return 0, err
		}
		got := 0
		for i := range ms[:n] {
			m := &ms[i]
			var h stressHdr
			if m.Addr != t.dst || !h.parse(m.Buffer[:min(m.N, len(m.Buffer))]) || h.run != s.runID || h.task != t.id || h.typ != typeAck {
				continue
			}
			t.hist.Record(uint64(max(monoNow()-h.ts, 0)))
			got++
		}
		if got > 0 {
			t.acked.Add(uint64(got))
			t.n.inflight.Add(^uint64(got - 1))
			return got, nil
		}
	}
}

// readTask reads task t's socket until a message of type want arrives for
// this run and task from the receiver; other messages are skipped. An
// answer is counted and its round trip recorded.
func (s *sender) readTask(ctx context.Context, t *senderTask, buf []byte, want uint8) (stressHdr, error) {
	for {
		n, _, _, from, err := t.c.ReadMsgContext(ctx, buf, nil, 0)
		if err != nil {
			if errors.Is(err, rdssock.ErrTruncated) {
				continue // not an answer of ours: those fit
			}
			return stressHdr{}, err
		}
		if from != t.dst {
			continue
		}
		var h stressHdr
		if !h.parse(buf[:n]) || h.run != s.runID || h.task != t.id || h.typ != want {
			continue
		}
		if want == typeAck {
			t.hist.Record(uint64(max(monoNow()-h.ts, 0)))
			t.acked.Add(1)
			t.n.inflight.Add(^uint64(0))
		}
		return h, nil
	}
}

// markEnd records that a task stopped sending; the measured interval ends
// when the last one does.
func (s *sender) markEnd() {
	now := time.Now().UnixNano()
	for {
		old := s.end.Load()
		if old >= now || s.end.CompareAndSwap(old, now) {
			return
		}
	}
}
