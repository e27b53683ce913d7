package reliability

// The kernel-deviation signatures and the result they judge, with no build
// tag, so that their self-checks run as host unit tests.

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/go-rds/rds/integration/vmtest"
)

// result sums a run up in the RELIABILITY line's terms.
type result struct {
	sent, accepted, received, dup, reordered, corrupt, lost int
	unexpected                                              int // delivered but never accepted, or from nowhere
}

// add sums o into r.
func (r *result) add(o result) {
	r.sent += o.sent
	r.accepted += o.accepted
	r.received += o.received
	r.dup += o.dup
	r.reordered += o.reordered
	r.corrupt += o.corrupt
	r.lost += o.lost
	r.unexpected += o.unexpected
}

// clean reports whether r shows exactly-once, in-order, intact delivery
// of everything accepted.
func (r result) clean() bool {
	return r.lost == 0 && r.dup == 0 && r.reordered == 0 && r.corrupt == 0 && r.unexpected == 0 && r.received == r.accepted
}

// senderFault is what one sender lost and got twice across a link fault,
// with the bound read from the kernel during the fault.
type senderFault struct {
	lost, dup int
	block     bool // the lost messages are one run of consecutive sequence numbers
	// inFlight is the most of the sender's messages on its namespace's
	// send and retransmit queues at one moment, sampled from the fault
	// until the flow ended: messages the kernel had not yet seen
	// acknowledged, the only ones a reset can make it send again.
	inFlight int
	dupSeqs  []uint64  // sequence numbers that arrived twice
	atReset  seqWindow // the sender's messages on the queues at the reset
}

// seqWindow is the sequence numbers [from, to).
type seqWindow struct{ from, to uint64 }

func (w seqWindow) contains(seq uint64) bool { return seq >= w.from && seq < w.to }

// dupsInFlight reports whether every duplicate was one of the messages in
// flight at the reset: only those does the kernel send again
// (rds_send_path_reset requeues the retransmit queue).
func (s senderFault) dupsInFlight() bool {
	for _, seq := range s.dupSeqs {
		if !s.atReset.contains(seq) {
			return false
		}
	}
	return len(s.dupSeqs) == s.dup
}

// consecutive reports whether the sorted seqs are one run without gaps.
func consecutive(seqs []uint64) bool {
	return len(seqs) == 0 || seqs[len(seqs)-1]-seqs[0] == uint64(len(seqs)-1)
}

// laneShuffle reports whether a result after RDS/TCP path resets fits the
// multipath lane remapping bug: RDS keeps each path's receive sequence
// (cp_next_rx_seq) across a reconnect, but the accepting side assigns the
// new TCP connections to paths in arrival order (rds_tcp_accept_one_path),
// so a sender's lane may meet another lane's sequence state. Retransmitted
// copies then pass the old-sequence check (duplicates), or new messages
// fail it and are dropped as recv_drop_old_seq (losses). Nothing may be
// corrupted, reordered or come from nowhere, every loss must be matched
// by a recv_drop_old_seq, and every duplicate must be one of the messages
// its sender had in flight at the reset (only those are retransmitted).
func laneShuffle(r result, resets, oldSeq int, ss []senderFault) bool {
	if resets == 0 || (r.dup == 0 && r.lost == 0) || r.lost > oldSeq ||
		r.corrupt != 0 || r.reordered != 0 || r.unexpected != 0 {
		return false
	}
	for _, s := range ss {
		if !s.dupsInFlight() {
			return false
		}
	}
	return true
}

// reconnectDiscard reports whether a result after RDS/TCP path resets fits
// the kernel losing messages that its TCP had already acknowledged: the
// accepting kernel resets a new connection it has no free path for
// (rds_tcp_accept_one), or a path is shut down with received data still
// unread (rds_tcp_conn_path_shutdown does not drain), and the sender's
// rds_tcp_write_space drops the messages as delivered. Nothing may be
// corrupted, reordered or from nowhere; each sender lost at most one run
// of consecutive messages, no longer than its messages in flight during
// the fault (inFlight) plus rxMsgs, the most messages that the RDS/TCP
// sockets held unread at the reset; and a copy retransmitted across the
// reset may arrive twice (the lane remapping of laneShuffle), if it was in
// flight at the reset.
func reconnectDiscard(r result, resets int, ss []senderFault, rxMsgs int) bool {
	if resets == 0 || r.lost == 0 || r.corrupt != 0 || r.reordered != 0 || r.unexpected != 0 {
		return false
	}
	for _, s := range ss {
		if (s.lost > 0 && !s.block) || s.lost > s.inFlight+rxMsgs || !s.dupsInFlight() {
			return false
		}
	}
	return true
}

// parseRDSTCPUnread sums the rx_queue column of the lines of a
// /proc/net/tcp{,6} table whose local or remote port is 16385 (0x4001).
func parseRDSTCPUnread(table string) (int, error) {
	total := 0
	for i, line := range strings.Split(strings.TrimSpace(table), "\n") {
		fs := strings.Fields(line)
		if i == 0 || len(fs) < 5 {
			continue
		}
		if !strings.HasSuffix(fs[1], ":4001") && !strings.HasSuffix(fs[2], ":4001") {
			continue
		}
		_, rx, ok := strings.Cut(fs[4], ":")
		if !ok {
			return 0, fmt.Errorf("line %d: queue column %q", i, fs[4])
		}
		v, err := strconv.ParseUint(rx, 16, 32)
		if err != nil {
			return 0, fmt.Errorf("line %d: %w", i, err)
		}
		total += int(v)
	}
	return total, nil
}

// TestLinkFailureSignatures checks the two kernel-bug signatures that
// TestLinkFailure accepts after resets, on made-up results, so that a
// change to them cannot quietly excuse corruption, reordering, a
// duplicate without a reset, or a loss or duplicate beyond what the
// kernel had in flight at the fault.
func TestLinkFailureSignatures(t *testing.T) {
	w := seqWindow{from: 480, to: 540} // 60 messages in flight at the reset
	// Three senders; the first lost a block of 40 of its 60 in flight.
	within := []senderFault{{lost: 40, block: true, inFlight: 60, atReset: w}, {inFlight: 30}, {inFlight: 20}}
	lossy := result{sent: 4500, accepted: 4500, received: 4460, lost: 40}
	for _, tc := range []struct {
		name   string
		r      result
		resets int
		ss     []senderFault
		rx     int
		want   bool
	}{
		{"block lost within the messages in flight", lossy, 7710, within, 0, true},
		{"block within in flight plus unread at the reset", lossy, 7710, []senderFault{{lost: 40, block: true, inFlight: 30}}, 10, true},
		{"a duplicate in flight at the reset too", result{accepted: 4500, received: 4460, lost: 40, dup: 2}, 7710,
			[]senderFault{{lost: 40, dup: 2, dupSeqs: []uint64{500, 501}, block: true, inFlight: 60, atReset: w}}, 0, true},
		{"no reset", lossy, 0, within, 0, false},
		{"scattered losses", lossy, 7710, []senderFault{{lost: 40, block: false, inFlight: 60}}, 0, false},
		{"block larger than in flight", result{accepted: 4500, received: 3525, lost: 975}, 7710,
			[]senderFault{{lost: 975, block: true, inFlight: 120}}, 10, false},
		{"a duplicate not in flight at the reset", result{accepted: 4500, received: 4460, lost: 40, dup: 1}, 7710,
			[]senderFault{{lost: 40, dup: 1, dupSeqs: []uint64{541}, block: true, inFlight: 60, atReset: w}}, 0, false},
		{"corruption", result{accepted: 4500, received: 4460, lost: 40, corrupt: 1}, 7710, within, 0, false},
		{"reordering", result{accepted: 4500, received: 4460, lost: 40, reordered: 1}, 7710, within, 0, false},
		{"from nowhere", result{accepted: 4500, received: 4460, lost: 40, unexpected: 1}, 7710, within, 0, false},
		{"nothing lost", result{accepted: 4500, received: 4500, dup: 1}, 7710, []senderFault{{dup: 1, dupSeqs: []uint64{500}, atReset: w}}, 0, false},
	} {
		if got := reconnectDiscard(tc.r, tc.resets, tc.ss, tc.rx); got != tc.want {
			t.Errorf("%s: reconnectDiscard(%+v, resets %d, %+v, unread %d) = %v, want %v", tc.name, tc.r, tc.resets, tc.ss, tc.rx, got, tc.want)
		}
	}
	for _, tc := range []struct {
		name           string
		r              result
		resets, oldSeq int
		ss             []senderFault
		want           bool
	}{
		{"duplicates in flight at the reset", result{accepted: 4500, received: 4500, dup: 3}, 800, 0,
			[]senderFault{{dup: 3, dupSeqs: []uint64{480, 481, 539}, atReset: w}}, true},
		{"losses matched by recv_drop_old_seq", result{accepted: 4500, received: 4490, lost: 10, dup: 3}, 800, 10,
			[]senderFault{{lost: 10, dup: 3, dupSeqs: []uint64{500, 501, 502}, atReset: w}}, true},
		{"a duplicate without a reset", result{accepted: 4500, received: 4500, dup: 1}, 0, 0,
			[]senderFault{{dup: 1, dupSeqs: []uint64{500}, atReset: w}}, false},
		{"a duplicate before the window", result{accepted: 4500, received: 4500, dup: 1}, 800, 0,
			[]senderFault{{dup: 1, dupSeqs: []uint64{479}, atReset: w}}, false},
		{"a duplicate after the window", result{accepted: 4500, received: 4500, dup: 1}, 800, 0,
			[]senderFault{{dup: 1, dupSeqs: []uint64{540}, atReset: w}}, false},
		{"a duplicate of a sender with nothing in flight", result{accepted: 4500, received: 4500, dup: 1}, 800, 0,
			[]senderFault{{atReset: w}, {dup: 1, dupSeqs: []uint64{500}}}, false},
		{"a duplicate the tracker did not name", result{accepted: 4500, received: 4500, dup: 2}, 800, 0,
			[]senderFault{{dup: 2, dupSeqs: []uint64{500}, atReset: w}}, false},
		{"losses without recv_drop_old_seq", result{accepted: 4500, received: 3525, lost: 975, dup: 1}, 7710, 0,
			[]senderFault{{lost: 975, dup: 1, dupSeqs: []uint64{500}, atReset: w}}, false},
		{"one adjacent swap", result{accepted: 4500, received: 4500, reordered: 1}, 800, 0, []senderFault{{atReset: w}}, false},
	} {
		if got := laneShuffle(tc.r, tc.resets, tc.oldSeq, tc.ss); got != tc.want {
			t.Errorf("%s: laneShuffle(%+v, resets %d, recv_drop_old_seq %d, %+v) = %v, want %v", tc.name, tc.r, tc.resets, tc.oldSeq, tc.ss, got, tc.want)
		}
	}
}

func TestParseRDSTCPUnread(t *testing.T) {
	const table = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100000A:4001 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0000000000000000 100 0 0 10 0
   1: 0100000A:4001 0200000A:9C41 01 00000000:00000100 00:00000000 00000000     0        0 2 1 0000000000000000 20 4 30 10 -1
   2: 0200000A:9C42 0100000A:4001 01 00000010:00000020 00:00000000 00000000     0        0 3 1 0000000000000000 20 4 30 10 -1
   3: 0200000A:0016 0100000A:D431 01 00000000:00001000 00:00000000 00000000     0        0 4 1 0000000000000000 20 4 30 10 -1
`
	got, err := parseRDSTCPUnread(table)
	if err != nil || got != 0x100+0x20 {
		t.Errorf("parseRDSTCPUnread = %d, %v; want %d (port 22's queue not counted)", got, err, 0x100+0x20)
	}
	if _, err := parseRDSTCPUnread("header\n 0: 0100000A:4001 0200000A:9C41 01 zz\n"); err == nil {
		t.Error("parseRDSTCPUnread accepts a queue column without a colon")
	}
}

// TestAcceptDiscardSignature checks the fresh-connection loss signature on
// made-up outcomes: one block per sender after a path reset and a TCP
// abort is the kernel's; two blocks, a duplicate, a drop counter, a
// message left queued, or no reset is not; and a block is bounded only
// while it fits what was seen queued or what the reset socket could hold.
func TestAcceptDiscardSignature(t *testing.T) {
	sizes := make([]int, 200)
	for i := range sizes {
		sizes[i] = 1000 - rdsHeaderLen // 1000 bytes on the TCP stream each
	}
	block := func(from, to uint64) []uint64 {
		var s []uint64
		for i := from; i < to; i++ {
			s = append(s, i)
		}
		return s
	}
	base := func(missing []uint64, inFlight int) freshOutcome {
		fs := freshSender{id: 1, recvSide: peer, accepted: 200, missing: missing, inFlight: inFlight}
		if len(missing) > 0 {
			fs.rcvbufFits = fitsIn(sizes, missing[0], 20_500) // 20 messages
		}
		o := freshOutcome{
			res:       result{sent: 200, accepted: 200, received: 200 - len(missing), lost: len(missing)},
			senders:   []freshSender{fs},
			connReset: 1,
		}
		o.aborts[peer] = 1
		return o
	}
	for _, tc := range []struct {
		name      string
		o         freshOutcome
		signature bool
		bounded   bool
	}{
		{"block seen queued", base(block(30, 45), 15), true, true},
		{"block fits the receive buffer", base(block(30, 50), 4), true, true},
		{"block larger than both bounds", base(block(30, 51), 4), true, false},
		{"two blocks", base(append(block(30, 35), block(40, 42)...), 50), false, true},
		{"nothing lost", base(nil, 10), false, true},
		{"a duplicate", func() freshOutcome { o := base(block(30, 35), 10); o.res.dup = 1; return o }(), false, true},
		{"a drop counter moved", func() freshOutcome { o := base(block(30, 35), 10); o.dropped = 1; return o }(), false, true},
		{"a drop answered to a ping", func() freshOutcome {
			o := base(block(30, 35), 10)
			o.dropped, o.noSock, o.pings = 1, 1, 1
			return o
		}(), true, true},
		{"no-socket drops beyond the pings", func() freshOutcome {
			o := base(block(30, 35), 10)
			o.dropped, o.noSock, o.pings = 16, 16, 10
			return o
		}(), true, true},
		{"a dead-socket drop besides no-socket ones", func() freshOutcome {
			o := base(block(30, 35), 10)
			o.dropped, o.noSock = 17, 16
			return o
		}(), false, true},
		{"still queued", func() freshOutcome { o := base(block(30, 35), 10); o.queued = 1; return o }(), false, true},
		{"no path reset", func() freshOutcome { o := base(block(30, 35), 10); o.connReset = 0; return o }(), false, true},
		{"no TCP abort at the receiver", func() freshOutcome {
			o := base(block(30, 35), 10)
			o.aborts = [2]int64{1, 0}
			return o
		}(), false, true},
	} {
		why := tc.o.acceptDiscard()
		if (why == "") != tc.signature {
			t.Errorf("%s: acceptDiscard() = %q, want signature %v", tc.name, why, tc.signature)
		}
		if got, _ := tc.o.blocksBounded(); got != tc.bounded {
			t.Errorf("%s: blocksBounded() = %v, want %v", tc.name, got, tc.bounded)
		}
	}
	if n := fitsIn(sizes, 195, 1<<20); n != 5 {
		t.Errorf("fitsIn past the last message = %d, want the 5 there are", n)
	}
}

// TestPendingWindow checks the bound on messages that a lane switch can
// let be overtaken.
func TestPendingWindow(t *testing.T) {
	even := make([]int, 100)
	for i := range even {
		even[i] = 1000 - rdsHeaderLen // 1000 bytes on the TCP stream each
	}
	mixed := slices.Clone(even)
	mixed[50] = 10 // one small message among them
	for _, tc := range []struct {
		name               string
		sizes              []int
		rcvbuf, sndbufHalf int
		want               int
	}{
		// 5 whole messages in the receive buffer; the send queue takes
		// messages while under 2,000 bytes (952, 1,904, then full): 3;
		// one half reassembled.
		{"both buffers", even, 5_000, 2_000, 5 + 3 + 1},
		{"receive buffer only", even, 5_500, 0, 5 + 1},
		{"send buffer only", even, 0, 952, 1 + 1},
		{"a smaller message fits one more", mixed, 5_000, 2_000, 5 + 4 + 1},
		{"fewer messages than room", even[:4], 1 << 20, 1 << 20, 4},
	} {
		if got := pendingWindow(tc.sizes, tc.rcvbuf, tc.sndbufHalf); got != tc.want {
			t.Errorf("%s: pendingWindow = %d, want %d", tc.name, got, tc.want)
		}
	}
	o := freshOutcome{res: result{reordered: 12}, senders: []freshSender{{pendingFits: 7}, {pendingFits: 5}}}
	if ok, bound := o.lanesBounded(); !ok || bound != 12 {
		t.Errorf("lanesBounded() = %v, %d; want true, 12", ok, bound)
	}
	o.res.reordered = 13
	if ok, _ := o.lanesBounded(); ok {
		t.Error("lanesBounded() accepted 13 overtaken with room for 12")
	}
}

// side says in which network namespace a socket lives.
type side int

const (
	local side = iota // initial namespace, rdstcp0
	peer              // vmtest.PeerNamespaceName, rdstcp1
)

func (s side) String() string {
	if s == peer {
		return vmtest.PeerNamespaceName
	}
	return "initial"
}

// freshOutcome is what one no-warm-up run on a brand-new connection saw.
type freshOutcome struct {
	res     result
	senders []freshSender
	queued  int    // messages still on the senders' send or retransmit queues at the end
	deltas  string // RDS counters that moved
	dropped int    // moves of recv_drop_no_sock, recv_drop_dead_sock, recv_drop_old_seq
	noSock  int    // the move of recv_drop_no_sock alone
	tcp     string // TCP counters of either namespace that moved
	// aborts is, per namespace, how often TCP reset a connection because
	// the socket had been closed or shut down with unread data
	// (TcpExt.TCPAbortOnClose) or received data after that
	// (TcpExt.TCPAbortOnData).
	aborts    [2]int64
	connReset int // RDS conn_reset: path shutdowns
	// pings is how many RDS pings the kernel received (recv_ping, both
	// namespaces): the kernels' own handshake probes (handshakeProbes)
	// and any warm-up's.
	pings          int
	warmUpTimeouts uint64 // the senders' rdssock WarmUpTimeouts
}

// dataDropped is how many messages the kernels dropped that could have
// been the Go flow's: recv_drop_dead_sock and recv_drop_old_seq. A
// recv_drop_no_sock cannot be: the flow's receivers stay bound from before
// the first send until after the counters are read, and RDS looks a
// message's socket up by its destination address and port. The counters
// are the kernel's, shared by every namespace, so no-socket drops in the
// window are others' messages: answers to pings of sockets already closed
// (earlier tests' warm-ups, queued until a connection came up) and the
// C flow that runs beside the Go one (a CI run saw 16 with 10 pings).
func (o *freshOutcome) dataDropped() int {
	return o.dropped - o.noSock
}

// freshSender is one sender's part of a freshOutcome.
type freshSender struct {
	id       uint32
	recvSide side
	accepted int
	missing  []uint64 // accepted sequence numbers that never arrived
	// inFlight is the most of its messages on the sender's send and
	// retransmit queues at one moment, sampled through the run.
	inFlight int
	// rcvbufFits is how many of the sender's messages, from the first one
	// missing on, fit in the receive buffer of a TCP socket in the
	// receiving namespace (see freshOutcome.acceptDiscard); 0 if nothing
	// is missing.
	rcvbufFits int
	// pendingFits is the most of its messages that can be on their way at
	// one moment, delivered to no socket yet (see pendingWindow).
	pendingFits int
	order       []uint64 // arrival order
}

// rdsHeaderLen is the size of struct rds_header, which RDS/TCP puts before
// every message on the TCP stream.
const rdsHeaderLen = 48

// fitsIn returns how many messages, from first on, fit whole into
// budget bytes of TCP stream, each with its RDS header.
func fitsIn(sizes []int, first uint64, budget int) int {
	n := 0
	for _, sz := range sizes[min(int(first), len(sizes)):] {
		if budget -= sz + rdsHeaderLen; budget < 0 {
			break
		}
		n++
	}
	return n
}

// pendingWindow returns the most consecutive messages (of the given
// payload sizes) that can be on their way from an RDS/TCP sender at one
// moment without having reached the receiving socket: the sender's kernel
// keeps a message on its socket's send queue until the peer's TCP
// acknowledged it, and queues one only while the bytes already queued are
// below half the socket's SO_SNDBUF (rds_send_queue_rm, rds_sk_sndbuf), so
// sndbufHalf bounds those; an acknowledged message can still sit unread in
// the receiving TCP socket, whose buffer (rcvbuf bytes, each message with
// its RDS header) bounds those; and one more can be half reassembled.
// Only such a message can be overtaken by a later one on another path.
func pendingWindow(sizes []int, rcvbuf, sndbufHalf int) int {
	most := 0
	for i := range sizes {
		j, budget := i, rcvbuf
		for j < len(sizes) && budget-(sizes[j]+rdsHeaderLen) >= 0 {
			budget -= sizes[j] + rdsHeaderLen
			j++
		}
		for queued := 0; j < len(sizes) && queued < sndbufHalf; j++ {
			queued += sizes[j]
		}
		most = max(most, min(j-i+1, len(sizes)-i))
	}
	return most
}

// bound is the most messages of this sender that the accept-discard bug
// can lose in one block: the larger of what its queues were seen holding
// and what the reset socket's receive buffer can hold unread.
func (fs freshSender) bound() int { return max(fs.inFlight, fs.rcvbufFits) }

// acceptDiscard reports whether a run's losses carry the signature of the
// RDS/TCP accept-discard bug. The accepting kernel (the larger address)
// takes an incoming TCP connection, rds_tcp_accept_one_path finds no path
// in state DOWN among the first max(1, c_npaths) paths and returns NULL,
// and rds_tcp_accept_one closes the socket (rst_nsk) although its TCP has
// already acknowledged RDS messages on it; the sender's
// rds_tcp_write_space then drops those messages as delivered. Two
// openings were seen:
//
//   - both kernels open path 0 at once (traffic both ways on a new
//     connection), so the accepting side's own attempt holds path 0;
//   - one-way traffic: the smaller address learns the path count from the
//     handshake pong and connects paths 1-7, while the larger one, which
//     sends that pong before it records the count from the probe
//     (rds_recv_incoming, RDS_HS_PROBE), still has c_npaths 0 and so only
//     considers path 0, which is up: all seven connections are reset, and
//     the messages the sender had already put on its socket's path are
//     gone.
//
// Upstream fixed this in 2026 ("net/rds: rds_tcp_accept_one ought to not
// discard messages", with a drain on shutdown and the cp_index encoding in
// the same RDS/TCP series); Debian's 6.1.192 and 6.12.117 have neither.
//
// The signature: only losses (no duplicate, corruption or reordering);
// each affected sender lost one block of consecutive messages; no RDS drop
// counter moved; nothing stayed queued at the sender (its kernel counted
// them acknowledged); RDS shut a path down (conn_reset); and the receiving
// namespace's TCP aborted a connection that had been closed or shut down
// with data unread or still arriving. acceptDiscard returns "" when a run
// has it, else the first part that does not hold.
//
// How large a block may be is judged apart (blocksBounded): the kernel can
// only lose what the reset socket's TCP acknowledged, which is at most its
// receive buffer.
func (o freshOutcome) acceptDiscard() string {
	r := o.res
	switch {
	case r.lost == 0:
		return "nothing lost"
	case r.dup != 0 || r.corrupt != 0 || r.unexpected != 0:
		return fmt.Sprintf("besides losses, %d duplicated, %d corrupt, %d unexpected", r.dup, r.corrupt, r.unexpected)
	case o.dataDropped() != 0:
		return fmt.Sprintf("the receiving kernel dropped %d messages (recv_drop_* counters)", o.dataDropped())
	case o.queued != 0:
		return fmt.Sprintf("%d messages still queued at the senders", o.queued)
	case o.connReset == 0:
		return "no RDS path was shut down (conn_reset did not move)"
	}
	for _, fs := range o.senders {
		if len(fs.missing) == 0 {
			continue
		}
		if !consecutive(fs.missing) {
			return fmt.Sprintf("sender %d lost more than one block (%s)", fs.id, seqRanges(fs.missing))
		}
		if o.aborts[fs.recvSide] == 0 {
			return fmt.Sprintf("the %s namespace's TCP aborted no connection with unread data", fs.recvSide)
		}
	}
	return ""
}

// blocksBounded reports whether every sender's lost block is within
// freshSender.bound, and returns the sum of those bounds.
func (o freshOutcome) blocksBounded() (bool, int) {
	ok, sum := true, 0
	for _, fs := range o.senders {
		if len(fs.missing) == 0 {
			continue
		}
		sum += fs.bound()
		ok = ok && len(fs.missing) <= fs.bound()
	}
	return ok, sum
}

// lanesBounded reports whether a run's reordering (res.reordered, the
// messages that arrived after a later one) is within what its senders can
// have had on their way at the lane switch (freshSender.pendingFits), and
// returns that bound.
func (o freshOutcome) lanesBounded() (bool, int) {
	sum := 0
	for _, fs := range o.senders {
		sum += fs.pendingFits
	}
	return o.res.reordered <= sum, sum
}

// handshakeLanes reports whether a run's reordering carries the signature
// of the kernel's lane switch for non-blocking senders. Until the
// handshake told a new RDS/TCP connection how many paths the peer has
// (c_npaths still 0), rds_send_mprds_hash puts a non-blocking sender's
// messages on path 0 instead of waiting, as a blocking one would; once the
// count is known, the same socket's messages go on its hashed path. RDS
// orders messages per path only, so the later ones can overtake the early
// ones. Every rdssock.Conn is non-blocking.
//
// The signature: nothing lost, duplicated or corrupted; no RDS drop
// counter moved; and each sender's arrival order is two in-order streams
// merged, the first messages it sent (0 to k-1) and all the others (k on).
func (o freshOutcome) handshakeLanes() bool {
	r := o.res
	if r.reordered == 0 || r.lost != 0 || r.dup != 0 || r.corrupt != 0 || r.unexpected != 0 || o.dataDropped() != 0 {
		return false
	}
	for _, fs := range o.senders {
		if !twoStreams(fs.order) {
			return false
		}
	}
	return true
}

// seqRanges prints sequence numbers compactly: "0-4,7,9-12" (in the given
// order, so an arrival order shows its jumps).
func seqRanges(s []uint64) string {
	if len(s) == 0 {
		return "none"
	}
	var b strings.Builder
	start, prev := s[0], s[0]
	flush := func() {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		if start == prev {
			fmt.Fprintf(&b, "%d", start)
		} else {
			fmt.Fprintf(&b, "%d-%d", start, prev)
		}
	}
	for _, v := range s[1:] {
		if v == prev+1 {
			prev = v
			continue
		}
		flush()
		start, prev = v, v
	}
	flush()
	return b.String()
}
