//go:build integration

package reliability

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/go-rds/rds/integration/internal/cref"
	"github.com/go-rds/rds/integration/vmtest"
	"github.com/go-rds/rds/netlinkcfg"
	"github.com/go-rds/rds/rdssock"
)

// nextPort hands out RDS ports; every test uses fresh ones.
var nextPort atomic.Uint32

func port() uint16 { return uint16(30000 + nextPort.Add(1)) }

// open binds an RDS socket on s, closed at the end of the test.
func open(t testing.TB, s side, ap netip.AddrPort, cfg *rdssock.Config) *rdssock.Conn {
	t.Helper()
	c, err := openErr(s, ap, cfg)
	if err != nil {
		t.Fatalf("Listen(%v) in the %s namespace: %v", ap, s, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func openErr(s side, ap netip.AddrPort, cfg *rdssock.Config) (*rdssock.Conn, error) {
	var c2 rdssock.Config
	if cfg != nil {
		c2 = *cfg
	}
	if s == peer {
		ns, err := vmtest.PeerNamespace()
		if err != nil {
			return nil, err
		}
		defer ns.Close()
		c2.NetNS = ns.FD()
	}
	return rdssock.Listen(ap, &c2)
}

// link returns the name of the TCP veth end in namespace s.
func (s side) link() string {
	if s == peer {
		return vmtest.TCPPeerLink
	}
	return vmtest.TCPLink
}

// handles returns netlink handles of the initial and the peer namespace.
func handles(t testing.TB) (init, peer *netlinkcfg.Handle) {
	t.Helper()
	cur, err := netlinkcfg.CurrentNamespace()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cur.Close() })
	pns, err := vmtest.PeerNamespace()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pns.Close() })
	hi, err := cur.Handle()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hi.Close)
	hp, err := pns.Handle()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hp.Close)
	return hi, hp
}

// ---- message format ----

// A test message: magic, sender id, sequence number, payload length, then
// the payload, then a CRC-32C of everything before it.
const (
	magic     = 0x524c4231 // "RLB1"
	headerLen = 20
	trailer   = 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// payloadSize picks a varied payload size: mostly small, some a few KiB,
// a few spanning several TCP segments.
func payloadSize(r *rand.Rand, max int) int {
	switch x := r.IntN(100); {
	case x < 70:
		return r.IntN(512)
	case x < 95:
		return 512 + r.IntN(3584)
	default:
		return 4096 + r.IntN(max-4096+1)
	}
}

// encode writes message (id, seq) with a random payload of n bytes into
// buf and returns it.
func encode(buf []byte, r *rand.Rand, id uint32, seq uint64, n int) []byte {
	b := buf[:headerLen+n+trailer]
	binary.BigEndian.PutUint32(b[0:], magic)
	binary.BigEndian.PutUint32(b[4:], id)
	binary.BigEndian.PutUint64(b[8:], seq)
	binary.BigEndian.PutUint32(b[16:], uint32(n))
	for i := headerLen; i < headerLen+n; i += 8 {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], r.Uint64())
		copy(b[i:headerLen+n], w[:])
	}
	binary.BigEndian.PutUint32(b[headerLen+n:], crc32.Checksum(b[:headerLen+n], castagnoli))
	return b
}

// decode checks a received message and returns its sender id and sequence
// number; ok is false when it is not an intact test message.
func decode(b []byte) (id uint32, seq uint64, ok bool) {
	if len(b) < headerLen+trailer || binary.BigEndian.Uint32(b) != magic {
		return 0, 0, false
	}
	n := int(binary.BigEndian.Uint32(b[16:]))
	if len(b) != headerLen+n+trailer {
		return 0, 0, false
	}
	if crc32.Checksum(b[:headerLen+n], castagnoli) != binary.BigEndian.Uint32(b[headerLen+n:]) {
		return 0, 0, false
	}
	return binary.BigEndian.Uint32(b[4:]), binary.BigEndian.Uint64(b[8:]), true
}

// ---- receive-side bookkeeping ----

// pairLog is what one receiver saw from one sender.
type pairLog struct {
	from     netip.AddrPort
	seen     map[uint64]bool
	order    []uint64 // sequence numbers in arrival order (first copies only)
	maxSeen  int64
	dup      int
	dupSeqs  []uint64 // sequence numbers that arrived more than once
	reorder  int
	arrivals []time.Time
}

// tracker records every message a set of receivers got.
type tracker struct {
	mu      sync.Mutex
	pairs   map[uint32]*pairLog
	corrupt int
	stray   int // intact test messages from an unexpected sender address
	notices int // 0-byte messages (notifications) seen by a receiver
	last    time.Time
}

func newTracker() *tracker { return &tracker{pairs: make(map[uint32]*pairLog)} }

// expect registers sender id sending from addr.
func (tr *tracker) expect(id uint32, from netip.AddrPort) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.pairs[id] = &pairLog{from: from, seen: make(map[uint64]bool), maxSeen: -1}
}

// record accounts one received message.
func (tr *tracker) record(b []byte, from netip.AddrPort) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	now := time.Now()
	tr.last = now
	if len(b) == 0 {
		tr.notices++
		return
	}
	id, seq, ok := decode(b)
	if !ok {
		tr.corrupt++
		return
	}
	p := tr.pairs[id]
	if p == nil || p.from != from {
		tr.stray++
		return
	}
	if p.seen[seq] {
		p.dup++
		p.dupSeqs = append(p.dupSeqs, seq)
		return
	}
	p.seen[seq] = true
	p.order = append(p.order, seq)
	p.arrivals = append(p.arrivals, now)
	if int64(seq) < p.maxSeen {
		p.reorder++
	} else {
		p.maxSeen = int64(seq)
	}
}

// unique returns how many distinct messages arrived from all senders.
func (tr *tracker) unique() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	n := 0
	for _, p := range tr.pairs {
		n += len(p.seen)
	}
	return n
}

// receive reads from c into tr until stop is closed. Read errors other
// than timeouts are sent to errc.
func receive(c *rdssock.Conn, tr *tracker, stop <-chan struct{}, errc chan<- error) {
	buf := make([]byte, 1<<17)
	for {
		select {
		case <-stop:
			errc <- nil
			return
		default:
		}
		c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		n, _, _, from, err := c.ReadMsg(buf, nil)
		if err != nil {
			if isTimeout(err) {
				continue
			}
			errc <- fmt.Errorf("receiver %v: %w", c.LocalAddrPort(), err)
			return
		}
		tr.record(buf[:n], from)
	}
}

func isTimeout(err error) bool {
	var te interface{ Timeout() bool }
	return errors.As(err, &te) && te.Timeout() || errors.Is(err, os.ErrDeadlineExceeded)
}

// ---- senders ----

// sender is one sending socket and what it managed to send.
type sender struct {
	id        uint32
	side      side // the sender's namespace
	c         *rdssock.Conn
	to        netip.AddrPort
	count     int // messages to send
	maxSize   int // largest payload
	sent      int // distinct messages attempted
	accepted  int // WriteMsg succeeded (sequence numbers 0..accepted-1)
	congested int // ErrCongested results (each retried)
	// acceptedNow mirrors accepted for readers while the sender runs.
	acceptedNow atomic.Int64
	// cProbed says the C congestion probe ran when the sender stopped for
	// stale congestion, and cProbe what it saw.
	cProbed bool
	cProbe  cref.ProbeResult
	// wireBytes[seq] is the length of accepted message seq (the RDS
	// payload, without the kernel's header).
	wireBytes []int
	err       error
	// pause, if set, is called before each message; the link tests use
	// it to inject a fault after a number of messages.
	pause func(seq int)
}

// stuckAfter is how long a sender retries a destination that stays
// congested before it stops and looks for the kernel's stale congestion
// map (errStaleCongestion).
const stuckAfter = 20 * time.Second

// errStaleCongestion says a sender stopped because its kernel went on
// marking the destination port congested: a probe from a new socket was
// refused too while nothing was queued for the port (see probe), the
// kernel defect of rdssock's BUG note on stale
// congestion, not the library or the test.
var errStaleCongestion = errors.New("the kernel still marks the port congested")

// run sends s.count numbered messages. A congested destination is retried
// with the same sequence number after a short sleep, for up to stuckAfter.
// It stops at the first other error.
func (s *sender) run() {
	r := rand.New(rand.NewPCG(uint64(s.id), 0x5eed))
	buf := make([]byte, headerLen+s.maxSize+trailer)
	for seq := 0; seq < s.count; seq++ {
		if s.pause != nil {
			s.pause(seq)
		}
		msg := encode(buf, r, s.id, uint64(seq), payloadSize(r, s.maxSize))
		s.sent++
		var congestedSince time.Time
		for {
			s.c.SetWriteDeadline(time.Now().Add(90 * time.Second))
			_, err := s.c.WriteMsg(msg, nil, s.to)
			if err == nil {
				s.accepted++
				s.acceptedNow.Add(1)
				s.wireBytes = append(s.wireBytes, len(msg))
				break
			}
			if errors.Is(err, rdssock.ErrCongested) {
				s.congested++
				if congestedSince.IsZero() {
					congestedSince = time.Now()
				} else if time.Since(congestedSince) > stuckAfter {
					s.err = fmt.Errorf("sender %d (%v -> %v), message %d: congested for %v: %w", s.id, s.c.LocalAddrPort(), s.to, seq, stuckAfter, s.probe())
					return
				}
				time.Sleep(2 * time.Millisecond)
				continue
			}
			s.err = fmt.Errorf("sender %d (%v -> %v), message %d: %w", s.id, s.c.LocalAddrPort(), s.to, seq, err)
			return
		}
	}
}

// probe judges a destination that stayed congested, at that moment: it
// counts the messages queued for s.to on its namespace's receive queue,
// tries one non-blocking empty send to s.to from a new socket on s's
// address, and counts the queue again. It returns errStaleCongestion only
// if the probe send was refused as congested while nothing was queued for
// the port before or after it: then the receiver had drained it and the
// kernel's congestion map is stale. A receiver that is merely behind
// gives an ordinary error, which fails the test.
func (s *sender) probe() error {
	q1, err := queuedAt(s.to)
	if err != nil {
		return err
	}
	// The probe asks the kernel about congestion only: no warm-up (its
	// pings would also show in the fresh-connection tests' ping count).
	c, err := openErr(s.side, netip.AddrPortFrom(s.c.LocalAddrPort().Addr(), port()), &rdssock.Config{NoAutoWarmUp: true})
	if err != nil {
		return fmt.Errorf("probe socket: %w", err)
	}
	defer c.Close()
	_, perr := c.WriteMsgContext(context.Background(), nil, nil, s.to, unix.MSG_DONTWAIT)
	q2, err := queuedAt(s.to)
	if err != nil {
		return err
	}
	if q1+q2 > 0 {
		return fmt.Errorf("the receiver had %d and %d messages queued around the probe (probe send: %v): it fell behind", q1, q2, perr)
	}
	if !errors.Is(perr, rdssock.ErrCongested) {
		return fmt.Errorf("yet a probe send from a new socket returned %v", perr)
	}
	// The same probe from plain C, at once: if the kernel refuses it too,
	// the stale map is the kernel's, not this library's.
	ns := ""
	if s.side == peer {
		ns = nsPath(peer)
	}
	bin, err := filepath.Abs(cFaultBin)
	if err != nil {
		return err
	}
	cp, err := cref.ProbeCongestion(bin, ns, s.c.LocalAddrPort().Addr(), s.to)
	if err != nil {
		return err
	}
	s.cProbe = cp
	s.cProbed = true
	return errStaleCongestion
}

// queuedAt counts the messages on the receive queue of port to, read from
// the info table of the namespace that holds to's address.
func queuedAt(to netip.AddrPort) (int, error) {
	var c *rdssock.Conn
	var err error
	for _, sd := range []side{peer, local} {
		if c, err = openErr(sd, netip.AddrPortFrom(to.Addr(), port()), nil); err == nil {
			break
		}
	}
	if err != nil {
		return 0, fmt.Errorf("a socket on %v to read its receive queue: %w", to.Addr(), err)
	}
	defer c.Close()
	msgs, err := c.Messages(rdssock.ReceiveQueue)
	if err != nil {
		return 0, fmt.Errorf("queued receive messages: %w", err)
	}
	n := 0
	for _, m := range msgs {
		if m.Local.Addr().Unmap() == to.Addr().Unmap() && m.Local.Port() == to.Port() {
			n++
		}
	}
	return n, nil
}

// judgeSender reports a sender's error. A stop for stale congestion
// (errStaleCongestion, judged at the probe) is logged as KNOWN KERNEL BUG,
// with a stale-congestion row for rdstest's reliability table and a
// DEVIATION line whose C count says whether rdsfault-c's probe, sent at
// the same moment, was refused as congested too; without that it fails
// unless RDSTEST_RELIABILITY_STRICT=0. Any other error fails the test.
func judgeSender(t testing.TB, s *sender) {
	t.Helper()
	if s.err == nil {
		return
	}
	if !errors.Is(s.err, errStaleCongestion) {
		t.Error(s.err)
		return
	}
	c := -1
	if s.cProbed {
		c = 0
		if s.cProbe == cref.ProbeCongested {
			c = 1
		}
	}
	msg := fmt.Sprintf("KNOWN KERNEL BUG: %v, although its receive queue was empty at the probe; the C probe at the same moment: %v", s.err, s.cProbe)
	t.Logf("RELIABILITY|stale-congestion|kernel=%s|port=%v|outcome=KNOWN KERNEL BUG: port still congested after its receiver drained it (%s); C probe %v",
		vmtest.KernelRelease(), s.to, t.Name(), s.cProbe)
	judged(t, deviation(t, "stale-congestion", 1, -1, c, false), msg)
}

// strict reports whether a kernel deviation must be justified in the same
// run, within the bounds read from the kernel at the fault or reproduced
// by the C flow under the same fault. It is the default;
// RDSTEST_RELIABILITY_STRICT=0 only reports unjustified deviations.
func strict() bool { return os.Getenv("RDSTEST_RELIABILITY_STRICT") != "0" }

// deviation logs one deviation from the delivery promise that a kernel
// signature matched, in a form rdstest can collect, and reports whether it
// is accepted:
//
//	DEVIATION|<signature>|kernel=<release>|test=<name>|go=<n>|bound=<n>|c=<n>|basis=<bounds|c|none>|strict=<0|1>
//
// go counts the messages (or events) affected in the Go run; bound is the
// limit read from the kernel at the fault (-1: none) and bounded says the
// signature held the Go run within it; c is what the C flow showed under
// the same fault in the same VM run (-1: no C flow ran). The basis is
// "bounds" if bounded, else "c" if the C flow showed at least as many,
// else "none"; with basis none the deviation is accepted only when not
// strict.
func deviation(t testing.TB, signature string, goCount, bound, cCount int, bounded bool) bool {
	t.Helper()
	basis := "none"
	switch {
	case bounded:
		basis = "bounds"
	case cCount > 0 && goCount <= cCount:
		basis = "c"
	}
	st := 0
	if strict() {
		st = 1
	}
	t.Logf("DEVIATION|%s|kernel=%s|test=%s|go=%d|bound=%d|c=%d|basis=%s|strict=%d",
		signature, vmtest.KernelRelease(), t.Name(), goCount, bound, cCount, basis, st)
	return basis != "none" || !strict()
}

// judged logs msg, a known kernel deviation, or fails the test with it if
// it was not accepted (see deviation).
func judged(t testing.TB, accepted bool, msg string) {
	t.Helper()
	if accepted {
		t.Log(msg)
		return
	}
	t.Error(msg + " [strict: neither within bounds read at the fault nor reproduced by the C flow in this run]")
}

// ---- results ----

// tally compares what the senders had accepted with what tr saw.
func tally(tr *tracker, senders []*sender) result {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var r result
	for _, s := range senders {
		r.sent += s.sent
		r.accepted += s.accepted
		p := tr.pairs[s.id]
		if p == nil {
			r.lost += s.accepted
			continue
		}
		r.dup += p.dup
		r.reordered += p.reorder
		for seq := range p.seen {
			if seq < uint64(s.accepted) {
				r.received++
			} else {
				r.unexpected++
			}
		}
		r.lost += s.accepted - minInt(s.accepted, countBelow(p.seen, s.accepted))
	}
	r.corrupt = tr.corrupt
	r.unexpected += tr.stray
	return r
}

func countBelow(seen map[uint64]bool, n int) int {
	c := 0
	for seq := range seen {
		if seq < uint64(n) {
			c++
		}
	}
	return c
}

func minInt(a, b int) int {
	if a < b {
		return a
	}
	return b
}

// logLine writes the RELIABILITY summary line for one fault.
func logLine(t testing.TB, fault string, r result, outcome string) {
	t.Helper()
	outcome = strings.ReplaceAll(outcome, "|", "/")
	t.Logf("RELIABILITY|%s|kernel=%s|sent=%d|accepted=%d|received=%d|dup=%d|reordered=%d|corrupt=%d|lost=%d|outcome=%s",
		fault, vmtest.KernelRelease(), r.sent, r.accepted, r.received, r.dup, r.reordered, r.corrupt, r.lost, outcome)
}

// ---- flows ----

// flow is a set of senders feeding receivers, all tracked by one tracker.
type flow struct {
	t         testing.TB
	tr        *tracker
	receivers []*rdssock.Conn
	senders   []*sender
}

func newFlow(t testing.TB) *flow { return &flow{t: t, tr: newTracker()} }

// receiver adds a receiving socket bound on s at addr.
func (f *flow) receiver(s side, addr netip.Addr, cfg *rdssock.Config) *rdssock.Conn {
	c := open(f.t, s, netip.AddrPortFrom(addr, port()), cfg)
	f.receivers = append(f.receivers, c)
	return c
}

// sender adds a sender bound on s at addr that sends count messages to to.
func (f *flow) sender(s side, addr netip.Addr, to *rdssock.Conn, count, maxSize int, cfg *rdssock.Config) *sender {
	c := open(f.t, s, netip.AddrPortFrom(addr, port()), cfg)
	sn := &sender{id: uint32(len(f.senders) + 1), side: s, c: c, to: to.LocalAddrPort(), count: count, maxSize: maxSize}
	f.tr.expect(sn.id, c.LocalAddrPort())
	f.senders = append(f.senders, sn)
	return sn
}

// run starts the receivers, runs all senders to completion, then waits up
// to drain for every accepted message to arrive. It returns the tally and
// the time the senders took.
func (f *flow) run(drain time.Duration) (result, time.Duration) {
	t := f.t
	t.Helper()
	stop := make(chan struct{})
	errc := make(chan error, len(f.receivers))
	for _, c := range f.receivers {
		go receive(c, f.tr, stop, errc)
	}
	start := time.Now()
	var wg sync.WaitGroup
	for _, s := range f.senders {
		wg.Add(1)
		go func() { defer wg.Done(); s.run() }()
	}
	wg.Wait()
	took := time.Since(start)
	accepted := 0
	for _, s := range f.senders {
		accepted += s.accepted
		judgeSender(t, s)
	}
	// Wait for the rest; once no sender has anything left on a send or
	// retransmit queue, and no receiver on its receive queue, for a whole
	// second, nothing more can come. (Once, on a loaded host, 61 messages
	// of a flow counted as lost after the senders' queues had been empty
	// for a second, while the kernel's counters showed messages queued to
	// sockets and not yet read; the receive queues were not looked at.)
	deadline := time.Now().Add(drain)
	var idleSince time.Time
	for f.tr.unique() < accepted && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		switch {
		case queuedFrom(t, f.senders) > 0 || unreadAt(t, f.receivers) > 0:
			idleSince = time.Time{}
		case idleSince.IsZero():
			idleSince = time.Now()
		case time.Since(idleSince) > time.Second:
			deadline = time.Now()
		}
	}
	// A short grace period shows duplicates that trail the last message.
	time.Sleep(100 * time.Millisecond)
	if n := unreadAt(t, f.receivers); n > 0 && f.tr.unique() < accepted {
		t.Logf("%d messages still wait unread on the receivers' sockets at the end of the drain: they count as lost", n)
	}
	close(stop)
	for range f.receivers {
		if err := <-errc; err != nil {
			t.Error(err)
		}
	}
	return tally(f.tr, f.senders), took
}

// ---- kernel counters ----

// counters reads the global RDS counters (RDS_INFO_COUNTERS) through c.
func counters(t testing.TB, c *rdssock.Conn) map[string]uint64 {
	t.Helper()
	cs, err := c.Counters()
	if err != nil {
		t.Fatalf("Counters: %v", err)
	}
	m := make(map[string]uint64, len(cs))
	for _, x := range cs {
		m[x.Name] = x.Value
	}
	return m
}

// delta returns after[name]-before[name], failing when the counter is
// missing.
func delta(t testing.TB, before, after map[string]uint64, name string) int {
	t.Helper()
	a, ok1 := after[name]
	b, ok2 := before[name]
	if !ok1 || !ok2 {
		t.Fatalf("kernel has no RDS counter %q", name)
	}
	return int(a - b)
}

// nonZeroDeltas lists the counters that changed, for logs.
func nonZeroDeltas(before, after map[string]uint64) string {
	var b strings.Builder
	for _, name := range counterOrder(after) {
		if d := after[name] - before[name]; d != 0 {
			fmt.Fprintf(&b, " %s=%d", name, d)
		}
	}
	return strings.TrimSpace(b.String())
}

func counterOrder(m map[string]uint64) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	// Simple insertion sort: a few dozen names.
	for i := 1; i < len(names); i++ {
		for j := i; j > 0 && names[j] < names[j-1]; j-- {
			names[j], names[j-1] = names[j-1], names[j]
		}
	}
	return names
}

// ---- connection warm-up ----

// ping sends RDS pings from c to the kernel at dst (port 0) until one is
// answered, which means the RDS/TCP connection between the two addresses
// is up in both namespaces. It gives up after 20s.
func ping(t testing.TB, c *rdssock.Conn, dst netip.Addr) {
	t.Helper()
	took, err := pingWithin(c, dst, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if took > 2*time.Second {
		t.Logf("RDS ping %v -> %v answered after %v", c.LocalAddrPort(), dst, took.Round(time.Millisecond))
	}
}

// pingWithin is ping that returns an error, and how long the answer took.
func pingWithin(c *rdssock.Conn, dst netip.Addr, limit time.Duration) (time.Duration, error) {
	buf := make([]byte, 64)
	start := time.Now()
	defer c.SetReadDeadline(time.Time{})
	for time.Since(start) < limit {
		if _, err := c.WriteMsg(nil, nil, netip.AddrPortFrom(dst, 0)); err != nil {
			return time.Since(start), fmt.Errorf("ping %v from %v: %w", dst, c.LocalAddrPort(), err)
		}
		c.SetReadDeadline(time.Now().Add(time.Second))
		n, _, _, from, err := c.ReadMsg(buf, nil)
		if err == nil && n == 0 && from.Addr() == dst && from.Port() == 0 {
			return time.Since(start), nil
		}
		if err != nil && !isTimeout(err) {
			return time.Since(start), fmt.Errorf("ping reply on %v: %w", c.LocalAddrPort(), err)
		}
	}
	return time.Since(start), fmt.Errorf("no RDS ping reply from %v to %v within %v; this namespace's view: %s",
		dst, c.LocalAddrPort(), limit, connState(c, c.LocalAddrPort().Addr(), dst))
}

// connState describes, for failure messages, the RDS connection between a
// and b as c's namespace sees it: the connection rows with their flags
// and the TCP sockets of its paths with their queued bytes.
func connState(c *rdssock.Conn, a, b netip.Addr) string {
	var parts []string
	between := func(x, y netip.Addr) bool {
		x, y = x.Unmap(), y.Unmap()
		return x == a.Unmap() && y == b.Unmap() || x == b.Unmap() && y == a.Unmap()
	}
	if conns, err := c.Connections(); err != nil {
		parts = append(parts, "connections: "+err.Error())
	} else {
		for _, cn := range conns {
			if between(cn.Local, cn.Remote) {
				parts = append(parts, fmt.Sprintf("conn %v->%v %s sending %t connecting %t connected %t tx %d rx %d", cn.Local, cn.Remote, cn.Transport, cn.Sending, cn.Connecting, cn.Connected, cn.NextTxSeq, cn.NextRxSeq))
			}
		}
	}
	if socks, err := c.TCPSockets(); err != nil {
		parts = append(parts, "tcp sockets: "+err.Error())
	} else {
		n := 0
		for _, s := range socks {
			if between(s.Local.Addr(), s.Peer.Addr()) {
				n++
				parts = append(parts, fmt.Sprintf("path %v->%v unsent %d+%d", s.Local, s.Peer, s.HeaderRemaining, s.DataRemaining))
			}
		}
		parts = append(parts, fmt.Sprintf("%d TCP paths", n))
	}
	return strings.Join(parts, "; ")
}

// direction is one way across the topology's RDS/TCP connections.
type direction struct {
	s        side // the sending namespace
	from, to netip.Addr
}

// directions are the four: IPv4 and IPv6, each way.
var directions = []direction{
	{local, vmtest.TCPLocal4, vmtest.TCPPeer4},
	{peer, vmtest.TCPPeer4, vmtest.TCPLocal4},
	{local, vmtest.TCPLocal6, vmtest.TCPPeer6},
	{peer, vmtest.TCPPeer6, vmtest.TCPLocal6},
}

// warmUp brings up the RDS/TCP connections of the topology, IPv4 and
// IPv6, in both directions, with rdssock.WarmUp: the fault tests start
// only once every path is up (traffic on a path that is still being
// accepted can be lost, see freshOutcome.acceptDiscard).
func warmUp(t testing.TB) {
	t.Helper()
	for _, p := range directions {
		var cfg rdssock.Config
		if p.s == peer {
			ns, err := vmtest.PeerNamespace()
			if err != nil {
				t.Fatal(err)
			}
			defer ns.Close()
			cfg.NetNS = ns.FD()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err := rdssock.WarmUp(ctx, p.from, p.to, &cfg)
		cancel()
		if err != nil {
			t.Fatalf("WarmUp(%v -> %v) in the %s namespace: %v", p.from, p.to, p.s, err)
		}
	}
}

// connection returns the RDS connection l -> r in c's namespace, and
// whether there is one.
func connection(t testing.TB, c *rdssock.Conn, l, r netip.Addr) (rdssock.Connection, bool) {
	t.Helper()
	conns, err := c.Connections()
	if err != nil {
		t.Fatalf("Connections: %v", err)
	}
	for _, x := range conns {
		if x.Local.Unmap() == l && x.Remote.Unmap() == r {
			return x, true
		}
	}
	return rdssock.Connection{}, false
}

// tcpStats reads the TCP counters of namespace s from
// /proc/thread-self/net/snmp (Tcp) and netstat (TcpExt), keyed
// "Tcp.RetransSegs", "TcpExt.TCPOFOQueue" and so on.
func tcpStats(t testing.TB, s side) map[string]int64 {
	t.Helper()
	m := make(map[string]int64)
	read := func() error {
		for _, f := range []string{"/proc/thread-self/net/snmp", "/proc/thread-self/net/netstat"} {
			b, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			for i := 0; i+1 < len(lines); i += 2 {
				names, values := strings.Fields(lines[i]), strings.Fields(lines[i+1])
				if len(names) != len(values) || len(names) == 0 {
					continue
				}
				prefix := strings.TrimSuffix(names[0], ":")
				if prefix != "Tcp" && prefix != "TcpExt" {
					continue
				}
				for j := 1; j < len(names); j++ {
					var v int64
					fmt.Sscan(values[j], &v)
					m[prefix+"."+names[j]] = v
				}
			}
		}
		return nil
	}
	var err error
	if s == peer {
		err = vmtest.InPeerNamespace(read)
	} else {
		err = read()
	}
	if err != nil {
		t.Fatalf("read TCP counters of the %s namespace: %v", s, err)
	}
	return m
}

// tcpDelta sums the change of a TCP counter over both namespaces.
func tcpDelta(before, after [2]map[string]int64, name string) int64 {
	return after[0][name] - before[0][name] + after[1][name] - before[1][name]
}

func tcpBoth(t testing.TB) [2]map[string]int64 {
	return [2]map[string]int64{tcpStats(t, local), tcpStats(t, peer)}
}
