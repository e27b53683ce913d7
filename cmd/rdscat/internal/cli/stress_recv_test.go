//go:build linux

package cli

import (
	"net/netip"
	"strings"
	"testing"
)

// TestReceiverStreams follows two sender tasks of one run through the
// receiver's bookkeeping: counts on two ports (each port's stream cache
// must count a stream that moves between them in the one stream), a
// sequence gap, a repeated fin, and the run finishing with its last task.
func TestReceiverStreams(t *testing.T) {
	r := &receiver{runs: map[uint32]*recvRun{}, streams: map[streamKey]*recvStream{}, rdma: map[streamKey]*rdmaStream{}}
	p0, p1 := &recvPort{receiver: r}, &recvPort{receiver: r}
	r.ports = []*recvPort{p0, p1}
	from := netip.MustParseAddrPort("10.0.0.1:5000")
	a, b := streamKey{7, 0, from}, streamKey{7, 1, from}
	p0.count(a, 0, 100)
	p1.count(b, 0, 50)
	p1.count(a, 1, 100) // a on the other port: p1's cache held b
	p0.count(a, 3, 100) // 2 is missing; p0's cache still holds a
	p0.count(a, 4, 100)
	if msgs, bytes, _ := r.totals(); msgs != 5 || bytes != 450 {
		t.Errorf("totals: %d messages, %d bytes; want 5, 450", msgs, bytes)
	}
	if got := p1.n.msgs.Load(); got != 2 {
		t.Errorf("port 1 counted %d messages, want 2", got)
	}

	fin := stressHdr{typ: typeFin, run: 7, task: 0, aux: 2}
	for i := range 2 { // a fin sent again counts once
		counted, seqErrs, bad, done := r.finStream(fin, a)
		if counted != 4 || seqErrs != 1 || bad != 0 || done {
			t.Fatalf("fin %d of task 0: counted %d, seq errors %d, bad %d, run done %v; want 4, 1, 0, false", i, counted, seqErrs, bad, done)
		}
	}
	if r.finished != 1 || r.seqErrs != 1 {
		t.Errorf("after task 0's fins: %d tasks finished, %d sequence errors; want 1, 1", r.finished, r.seqErrs)
	}
	fin.task = 1
	if counted, seqErrs, _, done := r.finStream(fin, b); counted != 1 || seqErrs != 0 || !done {
		t.Errorf("fin of task 1: counted %d, seq errors %d, run done %v; want 1, 0, true", counted, seqErrs, done)
	}
	if r.finished != 2 || len(r.runs) != 1 {
		t.Errorf("%d tasks finished in %d runs, want 2 in 1", r.finished, len(r.runs))
	}
}

func TestStressReportFailure(t *testing.T) {
	for _, c := range []struct {
		name string
		rep  stressReport
		want string // "" for no error
	}{
		{"match", stressReport{Sender: &senderReport{Sent: 5, ReceiverCounted: 5, CountsMatch: true}}, ""},
		{"receiver only", stressReport{Receiver: &receiverReport{}}, ""},
		{"lost", stressReport{Sender: &senderReport{Sent: 5, ReceiverCounted: 4}}, "counted 4 messages but 5 were sent"},
		{"rdma lost", stressReport{Sender: &senderReport{Acked: 5, ReceiverCounted: 3, RDMA: &rdmaSenderReport{}}}, "counted 3 RDMA operations but 5 completed"},
		{"bad read", stressReport{Sender: &senderReport{CountsMatch: true, RDMA: &rdmaSenderReport{VerifyErrors: 2}}}, "2 READs and 0 WRITEs"},
		{"bad write", stressReport{Receiver: &receiverReport{RDMA: &rdmaReceiverReport{VerifyErrors: 1}}}, "1 RDMA WRITEs landed"},
	} {
		err := c.rep.failure()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v, want no error", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
}
