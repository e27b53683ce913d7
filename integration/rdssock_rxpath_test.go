//go:build integration

package integration

import (
	"bytes"
	"context"
	"io"
	"net/netip"
	"testing"
	"time"

	"github.com/go-rds/rds/cmsg"
	"github.com/go-rds/rds/integration/vmtest"
	"github.com/go-rds/rds/rdssock"
	"golang.org/x/sys/unix"
)

// sendTraced sends size bytes from a to b, lets the message sit queued on
// b for hold, reads it and returns its RDS_CMSG_RXPATH_LATENCY (nil if
// none came) and the time from the send to the end of the read.
func sendTraced(t *testing.T, a, b *rdssock.Conn, size int, hold time.Duration) (*cmsg.RxTrace, time.Duration) {
	t.Helper()
	buf, oob := make([]byte, size+1), make([]byte, cmsg.MaxReceiveSpace)
	payload := bytes.Repeat([]byte{0x3c}, size)
	sent := time.Now()
	if _, err := a.WriteMsg(payload, nil, b.LocalAddrPort()); err != nil {
		t.Fatal(err)
	}
	if hold > 0 {
		if _, _, _, _, err := b.ReadMsgContext(context.Background(), buf, oob, unix.MSG_PEEK); err != nil {
			t.Fatal(err)
		}
		time.Sleep(hold)
	}
	n, oobn, _, _, err := b.ReadMsg(buf, oob)
	elapsed := time.Since(sent)
	if err != nil || !bytes.Equal(buf[:n], payload) {
		t.Fatalf("ReadMsg = %d bytes, %v; want the %d sent", n, err, size)
	}
	var tr *cmsg.RxTrace
	p := cmsg.NewParser(oob[:oobn])
	for {
		m, err := p.Next()
		if err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if r, err := m.RxPathLatency(); err == nil {
			if tr != nil {
				t.Fatal("two RDS_CMSG_RXPATH_LATENCY on one message")
			}
			tr = &r
		}
	}
	return tr, elapsed
}

// TestIntegrationRowsRxPathPoints checks what SO_RDS_MSG_RXPATH_LATENCY
// reports against net/rds (recv.c, tcp_recv.c, ib_recv.c): the kernel
// stamps the header's arrival (0), the start of reassembly (1), the queueing
// on the socket (2) and the recvmsg (3), all with local_clock, and point i
// is stamp i+1 minus stamp i. So points come back in the order asked for,
// each one is non-negative, and together they fit in the time from send to
// receive; point 2 covers the time the message sat queued.
func TestIntegrationRowsRxPathPoints(t *testing.T) {
	vmtest.Require(t)
	const hold = 150 * time.Millisecond
	all := []cmsg.TracePoint{cmsg.TraceHdrToDgramStart, cmsg.TraceDgramReassemble, cmsg.TraceDgramDelivered}
	for _, tc := range []struct {
		name          string
		local, remote func(t *testing.T, cfg *rdssock.Config) *rdssock.Conn
	}{
		{"tcp", func(t *testing.T, cfg *rdssock.Config) *rdssock.Conn {
			return listen(t, netip.AddrPortFrom(vmtest.TCPLocal4, port()), cfg)
		}, func(t *testing.T, cfg *rdssock.Config) *rdssock.Conn {
			return listenPeer(t, netip.AddrPortFrom(vmtest.TCPPeer4, port()), cfg)
		}},
		{"ib", func(t *testing.T, cfg *rdssock.Config) *rdssock.Conn {
			return listen(t, netip.AddrPortFrom(vmtest.IBAddr1, port()), cfg)
		}, func(t *testing.T, cfg *rdssock.Config) *rdssock.Conn {
			return listen(t, netip.AddrPortFrom(vmtest.IBAddr2, port()), cfg)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := tc.local(t, nil)
			// Reversed order and a subset: the report follows the request.
			b := tc.remote(t, &rdssock.Config{RxPathLatency: []cmsg.TracePoint{cmsg.TraceDgramDelivered, cmsg.TraceHdrToDgramStart}})
			tr, elapsed := sendTraced(t, a, b, 2000, hold)
			if tr == nil {
				t.Fatal("no RDS_CMSG_RXPATH_LATENCY")
			}
			t.Logf("points %v: %v, %v (%v from send to receive)", tr.Points[:tr.Count], tr.Latency[0], tr.Latency[1], elapsed)
			if tr.Count != 2 || tr.Points[0] != cmsg.TraceDgramDelivered || tr.Points[1] != cmsg.TraceHdrToDgramStart {
				t.Fatalf("trace %+v; want points 2 then 0", *tr)
			}
			if tr.Latency[2] != 0 {
				t.Errorf("unused third slot holds %v", tr.Latency[2])
			}
			if d := tr.Latency[0]; d < hold || d > elapsed {
				t.Errorf("point 2 (queued until recvmsg) = %v; want between the %v hold and the %v since sending", d, hold, elapsed)
			}
			if d := tr.Latency[1]; d < 0 || d > elapsed-hold {
				t.Errorf("point 0 = %v; want within the %v of the path outside the hold", d, elapsed-hold)
			}

			// Not asked for: no report.
			if tr, _ := sendTraced(t, a, tc.remote(t, nil), 100, 0); tr != nil {
				t.Fatalf("without Config.RxPathLatency: trace %+v", *tr)
			}

			// All three, on messages of one byte to 60 KiB (many TCP
			// segments, several IB fragments): each non-negative, their
			// sum within the time from send to receive.
			b = tc.remote(t, &rdssock.Config{RxPathLatency: all})
			for _, size := range []int{1, 4000, 60 << 10} {
				tr, elapsed := sendTraced(t, a, b, size, 0)
				if tr == nil {
					t.Fatalf("%d bytes: no RDS_CMSG_RXPATH_LATENCY", size)
				}
				t.Logf("%d bytes: %v %v %v (%v from send to receive)", size, tr.Latency[0], tr.Latency[1], tr.Latency[2], elapsed)
				if tr.Count != 3 || tr.Points != [3]cmsg.TracePoint{cmsg.TraceHdrToDgramStart, cmsg.TraceDgramReassemble, cmsg.TraceDgramDelivered} {
					t.Fatalf("trace %+v; want points 0, 1, 2", *tr)
				}
				var sum time.Duration
				for i := range 3 {
					// A stamp earlier than the one before would wrap to
					// an enormous unsigned difference.
					if d := tr.Latency[i]; d < 0 || d > elapsed {
						t.Errorf("%d bytes: point %d = %v; want within the %v since sending", size, i, d, elapsed)
					}
					sum += tr.Latency[i]
				}
				if sum > elapsed {
					t.Errorf("%d bytes: points sum to %v, more than the %v from send to receive", size, sum, elapsed)
				}
			}
		})
	}
}

// TestIntegrationRowsRxPathLoopback: the loop transport (127.0.0.1, ::1)
// queues messages without the transport receive path, so nothing stamps
// the header or the start of reassembly: point 0 is 0 and point 1 is the
// raw local_clock value at queueing (about the time since boot), not a
// latency. Point 2 is measured as elsewhere.
func TestIntegrationRowsRxPathLoopback(t *testing.T) {
	vmtest.Require(t)
	const hold = 100 * time.Millisecond
	a := listen(t, netip.AddrPortFrom(vmtest.Loopback4, port()), nil)
	b := listen(t, netip.AddrPortFrom(vmtest.Loopback4, port()), &rdssock.Config{
		RxPathLatency: []cmsg.TracePoint{cmsg.TraceHdrToDgramStart, cmsg.TraceDgramReassemble, cmsg.TraceDgramDelivered},
	})
	wantConnTransport(t, b, rdssock.TransportLoop)
	tr, elapsed := sendTraced(t, a, b, 100, hold)
	if tr == nil {
		t.Fatal("no RDS_CMSG_RXPATH_LATENCY")
	}
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		t.Fatal(err)
	}
	uptime := time.Duration(ts.Nano())
	t.Logf("loop: %v %v %v (%v from send to receive, %v since boot)", tr.Latency[0], tr.Latency[1], tr.Latency[2], elapsed, uptime)
	if tr.Latency[0] != 0 {
		t.Errorf("point 0 = %v; the loop transport does not stamp it, want 0", tr.Latency[0])
	}
	if d := tr.Latency[1]; d <= elapsed || d > uptime+time.Second {
		t.Errorf("point 1 = %v; want the clock value since boot (about %v), not a latency", d, uptime)
	}
	if d := tr.Latency[2]; d < hold || d > elapsed {
		t.Errorf("point 2 = %v; want between the %v hold and the %v since sending", d, hold, elapsed)
	}
}
