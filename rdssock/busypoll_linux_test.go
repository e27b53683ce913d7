//go:build linux

package rdssock

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

func TestBusyPollReceives(t *testing.T) {
	for _, tc := range []struct {
		name        string
		spin, delay time.Duration
	}{
		{"message arrives during the spin", 200 * time.Millisecond, 5 * time.Millisecond},
		{"message arrives after the spin", 2 * time.Millisecond, 60 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := pair(t)
			if err := b.SetBusyPoll(tc.spin); err != nil {
				t.Fatal(err)
			}
			time.AfterFunc(tc.delay, func() { a.WriteMsg([]byte("late"), nil, noAddr) })
			buf := make([]byte, 16)
			n, _, _, _, err := b.ReadMsg(buf, nil)
			if err != nil || string(buf[:n]) != "late" {
				t.Fatalf("ReadMsg = %q, %v; want \"late\"", buf[:n], err)
			}
			ms := []Message{{Buffer: buf}}
			time.AfterFunc(tc.delay, func() { a.WriteMsg([]byte("batch"), nil, noAddr) })
			if got, err := b.ReadBatch(context.Background(), ms, 0); err != nil || got != 1 || string(buf[:ms[0].N]) != "batch" {
				t.Fatalf("ReadBatch = %d, %v, %q; want 1, nil, \"batch\"", got, err, buf[:ms[0].N])
			}
		})
	}
}

// A deadline that passes during a wait after the spin still ends the read.
func TestBusyPollDeadline(t *testing.T) {
	_, b := pair(t)
	if err := b.SetBusyPoll(5 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := b.SetReadDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, _, _, _, err := b.ReadMsg(make([]byte, 8), nil)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("ReadMsg: %v; want os.ErrDeadlineExceeded", err)
	}
	if d := time.Since(start); d < 40*time.Millisecond || d > 2*time.Second {
		t.Fatalf("ReadMsg returned after %v; want about 50ms", d)
	}
}

func TestSetBusyPollNegative(t *testing.T) {
	_, b := pair(t)
	err := b.SetBusyPoll(-time.Microsecond)
	if err == nil || !strings.Contains(err.Error(), "use 0") {
		t.Fatalf("SetBusyPoll(-1µs) = %v; want an error that says to use 0", err)
	}
}

func TestAllocBusyPoll(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items; allocation counts are meaningless")
	}
	a, b := pair(t)
	if err := b.SetBusyPoll(time.Millisecond); err != nil {
		t.Fatal(err)
	}
	payload, buf := make([]byte, 64), make([]byte, 64)
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := a.WriteMsg(payload, nil, noAddr); err != nil {
			t.Fatal(err)
		}
		if _, _, _, _, err := b.ReadMsg(buf, nil); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("WriteMsg+ReadMsg with busy polling allocated %v times per call; want 0", allocs)
	}
}

// BenchmarkPingPong measures a request/response round trip between two
// goroutines, each answering the other, with the receive waiting in the
// poller and with busy polling: compare the ns/op of the sub-benchmarks.
//
// The "context" sub-benchmark waits with a context that can end, as a
// program with a run duration or a shutdown signal does.
func BenchmarkPingPong(b *testing.B) {
	for _, bc := range []struct {
		name string
		spin time.Duration
		ctx  bool
	}{{"poller", 0, false}, {"busypoll", 50 * time.Microsecond, false}, {"context", 0, true}} {
		spin := bc.spin
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			if bc.ctx {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, time.Hour)
				defer cancel()
			}
			x, y, err := socketpairConns()
			if err != nil {
				b.Fatal(err)
			}
			defer x.Close()
			defer y.Close()
			for _, c := range []*Conn{x, y} {
				if err := c.SetBusyPoll(spin); err != nil {
					b.Fatal(err)
				}
			}
			go func() {
				buf := make([]byte, 64)
				for {
					n, _, _, _, err := y.ReadMsgContext(ctx, buf, nil, 0)
					if err != nil {
						return
					}
					if _, err := y.WriteMsgContext(ctx, buf[:n], nil, noAddr, 0); err != nil {
						return
					}
				}
			}()
			msg, buf := make([]byte, 64), make([]byte, 64)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := x.WriteMsgContext(ctx, msg, nil, noAddr, 0); err != nil {
					b.Fatal(err)
				}
				if _, _, _, _, err := x.ReadMsgContext(ctx, buf, nil, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
