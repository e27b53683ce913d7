//go:build linux

package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"sync"
	"time"

	"github.com/go-rds/rds/rdmaops"
	"github.com/go-rds/rds/rdssock"
)

// The receiving end of rdscat stress (-listen): one socket per port
// (-ports) and one goroutine per socket that reads it, counts each sender
// task's stream, answers requests and fins, and serves RDMA senders
// (stress_rdma.go). The counts are shared by all ports.

// streamKey names one sender task's stream of one run.
type streamKey struct {
	run  uint32
	task uint16
	from netip.AddrPort
}

// is is k == o, written out so that the compiler inlines it (a == on the
// struct calls a generated function, once or twice per message).
func (k streamKey) is(o streamKey) bool {
	return k.run == o.run && k.task == o.task && k.from == o.from
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
	ports []*recvPort
	once  bool
	start time.Time

	mu       sync.Mutex
	runs     map[uint32]*recvRun
	streams  map[streamKey]*recvStream
	finished int
	seqErrs  uint64
	foreign  uint64
	rdma     map[streamKey]*rdmaStream
	// the RDMA stream of the last immediate data (rdmaMu; entries of
	// rdma are never deleted)
	lastRDMAKey streamKey
	lastRDMA    *rdmaStream
	rejected    uint64

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

// recvPort is one of the receiver's sockets with what its goroutine
// needs: answers go out on the socket the request came in on.
type recvPort struct {
	*receiver
	c  *rdssock.Conn
	rc *rdmaops.Conn // RDMA mode: registers the pools' buffers
	n  flowCount     // this port's share of the receiver's counters (n.msgs: the stress messages counted on it)

	// the stream of the port's last message counted, so that a run's
	// messages skip the map's hashing (r.mu; streams are never deleted)
	lastKey    streamKey
	lastStream *recvStream
}

// totals adds up the ports' counters.
func (r *receiver) totals() (msgs, bytes, acks uint64) {
	msgs, bytes, acks, _ = sumFlows(r.ports, func(p *recvPort) *flowCount { return &p.n })
	return msgs, bytes, acks
}

// newReceiver binds the receiver's sockets on lap and the -ports after it
// (in -listen-netns if given), writes the -ready file, and says where it
// listens when it runs alone.
func (o *stressOpts) newReceiver(e *env, lap netip.AddrPort) (*receiver, error) {
	sf := o.sock
	if o.listenNetns != "" {
		sf.netns = o.listenNetns
	}
	big := max(int(o.size), int(o.ackSize))
	r := &receiver{once: o.once || o.to != "", start: time.Now(), runs: map[uint32]*recvRun{}, streams: map[streamKey]*recvStream{}, rdma: map[streamKey]*rdmaStream{},
		rdmaMaxMem: int64(o.rdmaMaxMem), rdmaIdle: o.rdmaIdle, log: e.stderr, standalone: o.to == ""}
	for i := range max(o.ports, 1) {
		c, err := sf.listen(taskDest(lap, i, o.ports), func(cfg *rdssock.Config) {
			if cfg.SendBuffer == 0 {
				cfg.SendBuffer = bufferFor(big)
			}
			if cfg.ReceiveBuffer == 0 {
				cfg.ReceiveBuffer = max(4*big, 1<<20)
			}
			cfg.ForceBuffers = cfg.ForceBuffers || isRoot()
		})
		if err == nil {
			err = o.checkRDMAReceiver(c)
		}
		if err != nil {
			if c != nil {
				c.Close()
			}
			r.close()
			return nil, err
		}
		r.ports = append(r.ports, &recvPort{receiver: r, c: c})
	}
	first := r.ports[0].c
	if o.ready != "" {
		if err := writeFileAtomic(o.ready, first.LocalAddrPort().String()+"\n"); err != nil {
			r.close()
			return nil, err
		}
	}
	if o.to == "" && !o.json {
		tr, _ := first.Transport()
		ports := ""
		if len(r.ports) > 1 {
			ports = fmt.Sprintf(" and the %d ports after it", len(r.ports)-1)
		}
		fmt.Fprintf(e.stdout, "stress receiver on %v%s (transport %v)\n", first.LocalAddrPort(), ports, tr)
	}
	return r, nil
}

// perPort returns the messages counted on each port, or nil for one port.
func (r *receiver) perPort() []uint64 {
	if len(r.ports) < 2 {
		return nil
	}
	n := make([]uint64, len(r.ports))
	for i, p := range r.ports {
		n[i] = p.n.msgs.Load()
	}
	return n
}

// close closes the receiver's sockets.
func (r *receiver) close() {
	for _, p := range r.ports {
		p.c.Close()
	}
}

// checkRDMAReceiver checks that an RDMA receiver's socket runs over IB.
func (o *stressOpts) checkRDMAReceiver(c *rdssock.Conn) error {
	if o.rdma != "" {
		if tr, err := c.Transport(); err != nil || tr != rdssock.TransportIB {
			return rdmaTransportError(c.LocalAddrPort(), tr)
		}
	}
	return nil
}

// serve receives until ctx is done, -once is satisfied, or duration (when
// positive) has passed: one goroutine per port, this one for the first.
// When one port's goroutine stops (the run is over, or it failed) the
// others stop too. After a run that -once ends, every port waits until the
// answers it sent have been acknowledged, so that closing it loses none.
func (r *receiver) serve(ctx context.Context, e *env, duration time.Duration) error {
	ctx, end := r.begin(ctx, duration)
	defer end()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(r.ports))
	for _, p := range r.ports[1:] {
		go func() {
			err := p.serve(ctx, e)
			cancel()
			errs <- err
		}()
	}
	err := r.ports[0].serve(ctx, e)
	cancel()
	for range r.ports[1:] {
		if perr := <-errs; err == nil {
			err = perr
		}
	}
	if err != nil || !r.runDone() {
		return err
	}
	for _, p := range r.ports {
		if err := drain(e, p.c, 10*time.Second); err != nil {
			return err
		}
	}
	return nil
}

// runDone reports whether a run that -once waits for is over.
func (r *receiver) runDone() bool {
	select {
	case <-r.allDone:
		return true
	default:
		return false
	}
}

// serve reads port p until ctx is done or a run that -once waits for is
// over.
func (p *recvPort) serve(ctx context.Context, e *env) error {
	buf := make([]byte, maxMessage+1)
	ack := make([]byte, maxMessage)
	for {
		n, _, _, from, err := p.c.ReadMsgContext(ctx, buf, nil, 0)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, rdssock.ErrTruncated) {
				p.addForeign()
				continue
			}
			return fmt.Errorf("receive: %w", err)
		}
		if !from.IsValid() {
			continue
		}
		var h stressHdr
		if !h.parse(buf[:n]) {
			p.addForeign()
			continue
		}
		if stop, err := p.handle(ctx, e, h, buf[:n], from, ack); stop {
			return err
		}
	}
}

// begin prepares serve: the channel waitFinished waits on, the -duration
// deadline and the idle sweep. end, deferred, stops the sweep, notes the
// end time and frees the RDMA buffers.
func (r *receiver) begin(ctx context.Context, duration time.Duration) (_ context.Context, end func()) {
	r.mu.Lock()
	if r.allDone == nil {
		r.allDone = make(chan struct{})
	}
	r.mu.Unlock()
	cancel := context.CancelFunc(func() {})
	if duration > 0 {
		ctx, cancel = context.WithTimeout(ctx, duration)
	}
	sweepDone := r.startIdleSweep(ctx)
	return ctx, func() {
		sweepDone()
		r.mu.Lock()
		r.end = time.Now()
		r.mu.Unlock()
		r.closeRDMA(nil)
		cancel()
	}
}

// handle takes one stress message, msg with header h, from from. stop
// says that serve is done, returning err.
func (p *recvPort) handle(ctx context.Context, e *env, h stressHdr, msg []byte, from netip.AddrPort, ack []byte) (stop bool, err error) {
	key := streamKey{h.run, h.task, from}
	switch h.typ {
	case typeRDMAHello:
		if err := p.rdmaHello(ctx, e, h, msg, from); err != nil {
			return true, unlessDone(ctx, fmt.Errorf("RDMA hello from %v: %w", from, err))
		}
	case typeRDMAImm:
		if err := p.countImm(e, h, key, from); err != nil {
			return true, unlessDone(ctx, fmt.Errorf("RDMA credit to %v: %w", from, err))
		}
	case typeData, typeReq:
		p.count(key, h.seq, uint64(len(msg)))
		if h.typ == typeReq {
			if err := p.answer(e, h, from, ack); err != nil {
				return true, unlessDone(ctx, fmt.Errorf("ack to %v: %w", from, err))
			}
		}
	case typeFin:
		return p.fin(e, h, key, from, ack)
	}
	return false, nil
}

// unlessDone is err, or nil once ctx is done: serve was stopped.
func unlessDone(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// addForeign counts a message that is not part of a stress run.
func (r *receiver) addForeign() {
	r.mu.Lock()
	r.foreign++
	r.mu.Unlock()
}

// stream returns the stream of key, new if it has none; r.mu is held.
func (r *receiver) stream(key streamKey) *recvStream {
	s := r.streams[key]
	if s == nil {
		s = &recvStream{}
		r.streams[key] = s
	}
	return s
}

// stream is r.stream for a message that port p received: the same stream
// as p's last message skips the map. r.mu is held.
func (p *recvPort) stream(key streamKey) *recvStream {
	if p.lastStream != nil && key.is(p.lastKey) {
		return p.lastStream
	}
	s := p.receiver.stream(key)
	p.lastKey, p.lastStream = key, s
	return s
}

// record counts message seq, and a sequence error unless it is the next.
func (s *recvStream) record(seq uint64) {
	if seq != s.next {
		s.seqErrors++
	}
	s.next = seq + 1
	s.count++
}

// count records message seq of n bytes on stream key.
func (p *recvPort) count(key streamKey, seq, n uint64) {
	p.mu.Lock()
	p.stream(key).record(seq)
	p.mu.Unlock()
	p.n.msgs.Add(1)
	p.n.bytes.Add(n)
}

// countImm takes the immediate data of an RDMA operation (rdmaImm) and
// counts the operation on stream key with its transfer size; immediate
// data for no registered buffer is foreign.
func (p *recvPort) countImm(e *env, h stressHdr, key streamKey, from netip.AddrPort) error {
	r := p.receiver
	st, err := r.rdmaImm(e, h, from)
	if err != nil {
		return err
	}
	if st == nil {
		r.addForeign()
		return nil
	}
	r.mu.Lock()
	p.stream(key).record(h.seq)
	r.mu.Unlock()
	p.n.msgs.Add(1)
	p.n.bytes.Add(uint64(st.size))
	return nil
}

// answer sends the ack of request h to from, of the size h asks for.
func (p *recvPort) answer(e *env, h stressHdr, from netip.AddrPort, ack []byte) error {
	size := min(max(int(h.aux), stressHeader), maxMessage)
	a := stressHdr{typ: typeAck, task: h.task, run: h.run, seq: h.seq, ts: h.ts}
	a.put(ack)
	if err := sendRetry(e, p.c, ack[:size], from, 10*time.Second); err != nil {
		return err
	}
	p.n.acks.Add(1)
	return nil
}

// fin answers a sender task's fin h with the count of its stream key, its
// sequence errors and (RDMA) the WRITEs that landed wrong, and frees the
// stream's RDMA buffers. With -once, serve stops after the run's last fin
// (and waits for the answers to be acknowledged).
func (p *recvPort) fin(e *env, h stressHdr, key streamKey, from netip.AddrPort, ack []byte) (stop bool, err error) {
	counted, seqErrs, badData, runDone := p.finStream(h, key)
	a := stressHdr{typ: typeFinAck, task: h.task, run: h.run, seq: counted, aux: uint32(min(seqErrs, 1<<32-1)), ts: badData}
	a.put(ack)
	if err := sendRetry(e, p.c, ack[:stressHeader], from, 10*time.Second); err != nil {
		return true, fmt.Errorf("count to %v: %w", from, err)
	}
	p.closeRDMA(&key) // the sender's operations are all complete
	if !runDone || !p.once {
		return false, nil
	}
	p.doneOnce.Do(func() { close(p.allDone) })
	return true, nil
}

// finStream marks stream key finished (its first fin counts for the run)
// and returns its count, its sequence errors, its RDMA verify errors, and
// whether all of the run's tasks have finished.
func (r *receiver) finStream(h stressHdr, key streamKey) (counted, seqErrs uint64, badData int64, runDone bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.stream(key)
	counted, seqErrs = s.count, s.seqErrors
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
	if st := r.rdma[key]; st != nil {
		badData = int64(st.badData)
	}
	return counted, seqErrs, badData, run.finished >= run.tasks
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
