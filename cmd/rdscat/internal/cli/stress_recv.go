//go:build linux

package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-rds/rds/rdmaops"
	"github.com/go-rds/rds/rdssock"
)

// The receiving end of rdscat stress (-listen): one goroutine reads the
// socket, counts each sender task's stream, answers requests and fins, and
// serves RDMA senders (stress_rdma.go).

// streamKey names one sender task's stream of one run.
type streamKey struct {
	run  uint32
	task uint16
	from netip.AddrPort
}

type recvStream struct {
	count     uint64
	next      uint64
	seqErrors uint64
	finished  bool
}

type recvRun struct {
	tasks    int // from the fin messages
	finished int
}

type receiver struct {
	c     *rdssock.Conn
	rc    *rdmaops.Conn // RDMA mode: registers the pools' buffers
	once  bool
	start time.Time

	msgs, bytes, acks atomic.Uint64 // live counters

	mu       sync.Mutex
	runs     map[uint32]*recvRun
	streams  map[streamKey]*recvStream
	finished int
	seqErrs  uint64
	foreign  uint64
	rdma     map[streamKey]*rdmaStream
	rejected uint64

	// RDMA mode: registered memory and its limits (see stress_rdma.go).
	rdmaMu     sync.Mutex // serialises the streams' pools: the serve loop and the idle sweep
	rdmaMaxMem int64
	rdmaIdle   time.Duration
	regBytes   int64 // registered now, over all streams (r.mu)
	regPeak    int64 // most registered at once (r.mu)
	idleFreed  uint64
	log        io.Writer // the receiver's notes: registrations, refusals and idle frees
	standalone bool      // no sender in this process: log registrations too
	end        time.Time
	allDone    chan struct{} // closed when the first run has finished
	doneOnce   sync.Once
}

// newReceiver binds the receiver's socket on lap (in -listen-netns if
// given), writes the -ready file, and says where it listens when it runs
// alone.
func (o *stressOpts) newReceiver(e *env, lap netip.AddrPort) (*receiver, error) {
	sf := o.sock
	if o.listenNetns != "" {
		sf.netns = o.listenNetns
	}
	big := max(int(o.size), int(o.ackSize))
	c, err := sf.listen(lap, func(cfg *rdssock.Config) {
		if cfg.SendBuffer == 0 {
			cfg.SendBuffer = bufferFor(big)
		}
		if cfg.ReceiveBuffer == 0 {
			cfg.ReceiveBuffer = max(4*big, 1<<20)
		}
		cfg.ForceBuffers = cfg.ForceBuffers || isRoot()
	})
	if err != nil {
		return nil, err
	}
	if err := o.receiverReady(c); err != nil {
		c.Close()
		return nil, err
	}
	r := &receiver{c: c, once: o.once || o.to != "", start: time.Now(), runs: map[uint32]*recvRun{}, streams: map[streamKey]*recvStream{}, rdma: map[streamKey]*rdmaStream{},
		rdmaMaxMem: int64(o.rdmaMaxMem), rdmaIdle: o.rdmaIdle, log: e.stderr, standalone: o.to == ""}
	if o.to == "" {
		tr, _ := c.Transport()
		if !o.json {
			fmt.Fprintf(e.stdout, "stress receiver on %v (transport %v)\n", c.LocalAddrPort(), tr)
		}
	}
	return r, nil
}

// receiverReady checks that an RDMA receiver's socket runs over IB, and
// writes the bound address to the -ready file.
func (o *stressOpts) receiverReady(c *rdssock.Conn) error {
	if o.rdma != "" {
		if tr, err := c.Transport(); err != nil || tr != rdssock.TransportIB {
			return rdmaTransportError(c.LocalAddrPort(), tr)
		}
	}
	if o.ready != "" {
		return writeFileAtomic(o.ready, c.LocalAddrPort().String()+"\n")
	}
	return nil
}

// serve receives until ctx is done, -once is satisfied, or duration (when
// positive) has passed.
func (r *receiver) serve(ctx context.Context, e *env, duration time.Duration) error {
	r.mu.Lock()
	if r.allDone == nil {
		r.allDone = make(chan struct{})
	}
	r.mu.Unlock()
	if duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, duration)
		defer cancel()
	}
	buf := make([]byte, maxMessage+1)
	ack := make([]byte, maxMessage)
	sweepDone := r.startIdleSweep(ctx)
	defer func() {
		sweepDone()
		r.mu.Lock()
		r.end = time.Now()
		r.mu.Unlock()
		r.closeRDMA(nil)
	}()
	for {
		n, _, _, from, err := r.c.ReadMsgContext(ctx, buf, nil)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, rdssock.ErrTruncated) {
				r.mu.Lock()
				r.foreign++
				r.mu.Unlock()
				continue
			}
			return fmt.Errorf("receive: %w", err)
		}
		if !from.IsValid() {
			continue
		}
		var h stressHdr
		if !h.parse(buf[:n]) {
			r.mu.Lock()
			r.foreign++
			r.mu.Unlock()
			continue
		}
		key := streamKey{h.run, h.task, from}
		switch h.typ {
		case typeRDMAHello:
			if err := r.rdmaHello(ctx, e, h, buf[:n], from); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("RDMA hello from %v: %w", from, err)
			}
		case typeRDMAImm:
			known, err := r.rdmaImm(e, h, from)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("RDMA credit to %v: %w", from, err)
			}
			if !known {
				r.mu.Lock()
				r.foreign++
				r.mu.Unlock()
				continue
			}
			r.mu.Lock()
			s := r.streams[key]
			if s == nil {
				s = &recvStream{}
				r.streams[key] = s
			}
			if h.seq != s.next {
				s.seqErrors++
			}
			s.next = h.seq + 1
			s.count++
			size := r.rdma[key].size
			r.mu.Unlock()
			r.msgs.Add(1)
			r.bytes.Add(uint64(size))
		case typeData, typeReq:
			r.mu.Lock()
			s := r.streams[key]
			if s == nil {
				s = &recvStream{}
				r.streams[key] = s
			}
			if h.seq != s.next {
				s.seqErrors++
			}
			s.next = h.seq + 1
			s.count++
			r.mu.Unlock()
			r.msgs.Add(1)
			r.bytes.Add(uint64(n))
			if h.typ == typeReq {
				size := min(max(int(h.aux), stressHeader), maxMessage)
				a := stressHdr{typ: typeAck, task: h.task, run: h.run, seq: h.seq, ts: h.ts}
				a.put(ack)
				if err := sendRetry(e, r.c, ack[:size], from, 10*time.Second); err != nil {
					if ctx.Err() != nil {
						return nil
					}
					return fmt.Errorf("ack to %v: %w", from, err)
				}
				r.acks.Add(1)
			}
		case typeFin:
			r.mu.Lock()
			s := r.streams[key]
			if s == nil {
				s = &recvStream{}
				r.streams[key] = s
			}
			var counted, errs uint64 = s.count, s.seqErrors
			first := !s.finished
			s.finished = true
			run := r.runs[h.run]
			if run == nil {
				run = &recvRun{}
				r.runs[h.run] = run
			}
			if first {
				run.tasks = int(h.aux)
				run.finished++
				r.finished++
				r.seqErrs += s.seqErrors
			}
			runDone := run.finished >= run.tasks
			var badData int64
			if st := r.rdma[key]; st != nil {
				badData = int64(st.badData)
			}
			r.mu.Unlock()
			a := stressHdr{typ: typeFinAck, task: h.task, run: h.run, seq: counted, aux: uint32(min(errs, 1<<32-1)), ts: badData}
			a.put(ack)
			if err := sendRetry(e, r.c, ack[:stressHeader], from, 10*time.Second); err != nil {
				return fmt.Errorf("count to %v: %w", from, err)
			}
			r.closeRDMA(&key) // the sender's operations are all complete
			if runDone && r.once {
				r.doneOnce.Do(func() { close(r.allDone) })
				// The fin acks must reach the senders before the socket
				// closes.
				if err := drain(e, r.c, 10*time.Second); err != nil {
					return err
				}
				return nil
			}
		}
	}
}

// waitFinished waits until the first run has finished or d has passed.
func (r *receiver) waitFinished(d time.Duration) {
	r.mu.Lock()
	ch := r.allDone
	r.mu.Unlock()
	if ch == nil {
		return
	}
	select {
	case <-ch:
	case <-time.After(d):
	}
}
