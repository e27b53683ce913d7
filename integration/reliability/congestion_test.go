//go:build integration

package reliability

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/go-rds/rds/cmsg"
	"github.com/go-rds/rds/integration/vmtest"
	"github.com/go-rds/rds/netlinkcfg"
	"github.com/go-rds/rds/rdssock"
)

// TestCongestion covers RDS's receiver-driven flow control over RDS/TCP.
func TestCongestion(t *testing.T) {
	vmtest.Require(t)
	warmUp(t)
	t.Run("monitor", testCongestionMonitor)
	t.Run("cancel", testCancelSentTo)
}

// monitoredSender sends count 1 KiB messages; on ErrCongested it waits for
// the RDS_CMSG_CONG_UPDATE notice that the congestion monitor queues on its
// own socket, checks that the notice's mask names the destination port's
// group, and retries the same message.
type monitoredSender struct {
	*sender
	notices int
	err     error
}

func (m *monitoredSender) run() {
	s := m.sender
	r := rand.New(rand.NewPCG(uint64(s.id), 0xc0de))
	buf := make([]byte, headerLen+1024+trailer)
	rbuf, oob := make([]byte, 64), make([]byte, cmsg.MaxReceiveSpace)
	bit := uint64(1) << (s.to.Port() % 64)
	for seq := 0; seq < s.count; seq++ {
		msg := encode(buf, r, s.id, uint64(seq), 1024)
		s.sent++
		for {
			s.c.SetWriteDeadline(time.Now().Add(30 * time.Second))
			_, err := s.c.WriteMsg(msg, nil, s.to)
			if err == nil {
				s.accepted++
				break
			}
			if !errors.Is(err, rdssock.ErrCongested) {
				m.err = fmt.Errorf("sender %d, message %d: %w", s.id, seq, err)
				return
			}
			s.congested++
			// Wait for the notice: a 0-byte message with only control data.
			s.c.SetReadDeadline(time.Now().Add(10 * time.Second))
			n, oobn, _, _, err := s.c.ReadMsg(rbuf, oob)
			if err != nil {
				m.err = fmt.Errorf("sender %d, message %d: congested, and no congestion update arrived: %w", s.id, seq, err)
				return
			}
			if n != 0 {
				m.err = fmt.Errorf("sender %d: got %d data bytes while waiting for a congestion update", s.id, n)
				return
			}
			mask, err := congMask(oob[:oobn])
			if err != nil {
				m.err = fmt.Errorf("sender %d: notice %x: %w", s.id, oob[:oobn], err)
				return
			}
			if mask&bit == 0 {
				m.err = fmt.Errorf("sender %d: congestion update mask %#x lacks bit %d of port %d", s.id, mask, s.to.Port()%64, s.to.Port())
				return
			}
			m.notices++
		}
	}
}

// congMask returns the mask of the one RDS_CMSG_CONG_UPDATE in oob.
func congMask(oob []byte) (uint64, error) {
	p := cmsg.NewParser(oob)
	var mask uint64
	found := false
	for {
		m, err := p.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, err
		}
		v, err := m.CongUpdate()
		if err != nil {
			return 0, fmt.Errorf("unexpected control message: %w", err)
		}
		mask |= v
		found = true
	}
	if !found {
		return 0, errors.New("no RDS_CMSG_CONG_UPDATE")
	}
	return mask, nil
}

// testCongestionMonitor: a receiver with a 4 KiB receive buffer that reads
// one message every 2 ms at first, and two senders with the congestion
// monitor on. The senders must meet ErrCongested, be woken by congestion
// updates, and in the end every accepted message must have arrived once,
// in order, intact.
func testCongestionMonitor(t *testing.T) {
	const (
		perSender = 300
		slowFor   = 300 // messages read slowly
	)
	f := newFlow(t)
	rc := f.receiver(peer, vmtest.TCPPeer4, &rdssock.Config{ReceiveBuffer: 4096})
	var ms []*monitoredSender
	for range 2 {
		s := f.sender(local, vmtest.TCPLocal4, rc, perSender, 4096, &rdssock.Config{CongestionMonitor: true})
		ms = append(ms, &monitoredSender{sender: s})
	}
	before := counters(t, rc)
	stop := make(chan struct{})
	recvErr := make(chan error, 1)
	go func() {
		buf := make([]byte, 1<<16)
		for got := 0; ; got++ {
			select {
			case <-stop:
				recvErr <- nil
				return
			default:
			}
			if got < slowFor {
				time.Sleep(2 * time.Millisecond)
			}
			rc.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			n, _, _, from, err := rc.ReadMsg(buf, nil)
			if err != nil {
				if isTimeout(err) {
					continue
				}
				recvErr <- err
				return
			}
			f.tr.record(buf[:n], from)
		}
	}()
	var wg sync.WaitGroup
	for _, m := range ms {
		wg.Add(1)
		go func() { defer wg.Done(); m.run() }()
	}
	wg.Wait()
	accepted := 0
	for _, m := range ms {
		accepted += m.accepted
	}
	deadline := time.Now().Add(30 * time.Second)
	for f.tr.unique() < accepted && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	close(stop)
	if err := <-recvErr; err != nil {
		t.Fatalf("receiver: %v", err)
	}
	after := counters(t, rc)
	res := tally(f.tr, f.senders)
	congested, notices := 0, 0
	for _, m := range ms {
		if m.err != nil {
			t.Error(m.err)
		}
		congested += m.congested
		notices += m.notices
	}
	outcome := fmt.Sprintf("%d ErrCongested, %d congestion updates woke the senders", congested, notices)
	if !res.clean() || congested == 0 {
		outcome = "FAILED " + outcome
	}
	logLine(t, "congestion-monitor", res, outcome)
	t.Logf("RDS counters: %s", nonZeroDeltas(before, after))
	if congested == 0 {
		t.Errorf("no send met ErrCongested: the slow receiver with a 4 KiB buffer did not congest its port")
	}
	if d := delta(t, before, after, "cong_send_error"); d < congested {
		t.Errorf("cong_send_error rose by %d, but the senders saw %d ErrCongested", d, congested)
	}
	if !res.clean() {
		t.Errorf("delivery under congestion: %+v", res)
	}
}

// queuedFor counts c's messages on its namespace's send and retransmit
// queues.
func queuedFor(t testing.TB, c *rdssock.Conn) int {
	t.Helper()
	return queuedFrom(t, []*sender{{c: c}})
}

// testCancelSentTo holds a sender's messages back with netem dropping all
// of its link's egress, so they sit on the RDS send and retransmit
// queues; cancels them with CancelSentTo; lets the link work again and
// sends more. The receiver must see a gap-free prefix of the cancelled
// batch (what had already reached TCP's send buffer is still delivered,
// since RDS cannot take it back from TCP) and then every later message,
// in order, once, intact; the kernel's queue tables must show the queue
// emptied by the cancel.
func testCancelSentTo(t *testing.T) {
	const (
		before = 200 // messages queued, then cancelled
		after  = 200 // messages sent after the cancel
	)
	hi, _ := handles(t)
	f := newFlow(t)
	rc := f.receiver(peer, vmtest.TCPPeer4, nil)
	s := f.sender(local, vmtest.TCPLocal4, rc, before+after, 4096, &rdssock.Config{SendBuffer: 1 << 20})
	stop := make(chan struct{})
	errc := make(chan error, 1)
	go receive(rc, f.tr, stop, errc)

	if err := hi.SetNetem(vmtest.TCPLink, netlinkcfg.Netem{Loss: 100}); err != nil {
		t.Fatal(err)
	}
	cleared := false
	clear := func() {
		if !cleared {
			cleared = true
			if err := hi.ClearQdisc(vmtest.TCPLink); err != nil {
				t.Errorf("clear netem: %v", err)
			}
		}
	}
	defer clear()

	// Phase 1: queue messages 0..before-1 while nothing gets through.
	s.count = before
	s.run()
	if s.err != nil {
		t.Fatal(s.err)
	}
	queued := queuedFor(t, s.c)
	if err := s.c.CancelSentTo(rc.LocalAddrPort()); err != nil {
		t.Fatalf("CancelSentTo: %v", err)
	}
	left := queuedFor(t, s.c)
	clear()

	// Phase 2: messages before..before+after-1 after the cancel. The
	// sender's random stream continues where phase 1 stopped.
	s2 := &sender{id: s.id, side: s.side, c: s.c, to: s.to, count: after, maxSize: 4096}
	r := rand.New(rand.NewPCG(uint64(s.id), 0xa11))
	buf := make([]byte, headerLen+4096+trailer)
	for seq := before; seq < before+after; seq++ {
		msg := encode(buf, r, s.id, uint64(seq), payloadSize(r, 4096))
		s2.sent++
		for {
			s.c.SetWriteDeadline(time.Now().Add(30 * time.Second))
			_, err := s.c.WriteMsg(msg, nil, s.to)
			if err == nil {
				s2.accepted++
				break
			}
			if !errors.Is(err, rdssock.ErrCongested) {
				t.Fatalf("message %d after the cancel: %v", seq, err)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	// Wait for the last message (TCP retransmits after its backoff).
	deadline := time.Now().Add(30 * time.Second)
	for !f.tr.pairs[s.id].seenLocked(f.tr, uint64(before+after-1)) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	close(stop)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}

	f.tr.mu.Lock()
	p := f.tr.pairs[s.id]
	k := 0 // delivered prefix of the cancelled batch
	for k < before && p.seen[uint64(k)] {
		k++
	}
	var res result
	res.sent = s.sent + s2.sent
	res.accepted = s.accepted + s2.accepted
	res.received = len(p.seen)
	res.dup = p.dup
	res.reordered = p.reorder
	res.corrupt = f.tr.corrupt
	res.unexpected = f.tr.stray
	stray := 0 // cancelled messages beyond the prefix that still arrived
	for seq := range p.seen {
		if seq >= uint64(k) && seq < before {
			stray++
		}
	}
	for seq := uint64(before); seq < before+after; seq++ {
		if !p.seen[seq] {
			res.lost++
		}
	}
	order := seqRanges(p.order)
	f.tr.mu.Unlock()

	cancelled := before - k
	outcome := fmt.Sprintf("cancelled %d of %d queued (%d on the kernel queues before, %d after); %d had reached TCP and arrived; all %d later messages arrived",
		cancelled, before, queued, left, k, after-res.lost)
	ok := res.lost == 0 && res.dup == 0 && res.reordered == 0 && res.corrupt == 0 && res.unexpected == 0 && stray == 0 && left == 0 && cancelled > 0
	if !ok {
		outcome = "FAILED " + outcome
	}
	logLine(t, "cancel-sent-to", res, outcome)
	t.Logf("arrival order: %s", order)
	if queued == 0 {
		t.Errorf("no message was on the send or retransmit queue before the cancel: netem did not hold them back")
	}
	if left != 0 {
		t.Errorf("%d messages still queued after CancelSentTo", left)
	}
	if cancelled == 0 {
		t.Errorf("all %d messages arrived: CancelSentTo dropped nothing", before)
	}
	if stray != 0 {
		t.Errorf("%d cancelled messages beyond the delivered prefix 0-%d arrived anyway", stray, k-1)
	}
	if res.lost+res.dup+res.reordered+res.corrupt+res.unexpected != 0 {
		t.Errorf("delivery around CancelSentTo: %+v", res)
	}
}

// seenLocked reports whether p saw seq, under tr's lock.
func (p *pairLog) seenLocked(tr *tracker, seq uint64) bool {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return p.seen[seq]
}
