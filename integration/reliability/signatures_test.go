package reliability

// The kernel-deviation signatures and the result they judge, with no build
// tag, so that their self-checks run as host unit tests.

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
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

// blockWithin reports whether the sorted missing sequence numbers are one
// run of consecutive ones no longer than inFlight.
func blockWithin(missing []uint64, inFlight int) bool {
	return consecutive(missing) && len(missing) <= inFlight
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

func TestBlockWithin(t *testing.T) {
	for _, tc := range []struct {
		missing  []uint64
		inFlight int
		want     bool
	}{
		{nil, 0, true},
		{[]uint64{5, 6, 7}, 3, true},
		{[]uint64{5, 6, 7}, 2, false}, // larger than what was in flight
		{[]uint64{5, 7}, 10, false},   // two blocks
	} {
		if got := blockWithin(tc.missing, tc.inFlight); got != tc.want {
			t.Errorf("blockWithin(%v, %d) = %v, want %v", tc.missing, tc.inFlight, got, tc.want)
		}
	}
}
