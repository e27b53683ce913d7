//go:build linux

package rdssock

import (
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestWaitInKernel runs the message-path tests over socketpairs again with
// Conns that wait in the kernel (Config.WaitInKernel): the same deadlines,
// contexts, Close, truncation, batches and allocation bounds hold.
func TestWaitInKernel(t *testing.T) {
	pairsWaitInKernel = true
	defer func() { pairsWaitInKernel = false }()
	for _, tc := range []struct {
		name string
		f    func(*testing.T)
	}{
		{"ReadWriteMsgPayload", TestReadWriteMsgPayload},
		{"ZeroByteMessageWithControlData", TestZeroByteMessageWithControlData},
		{"ReadMsgTruncation", TestReadMsgTruncation},
		{"ReadDeadline", TestReadDeadline},
		{"ReadMsgContextCancel", TestReadMsgContextCancel},
		{"ReadMsgContextDeadline", TestReadMsgContextDeadline},
		{"ReadMsgDontWait", TestReadMsgDontWait},
		{"CloseUnblocksRead", TestCloseUnblocksRead},
		{"AllocReadWriteMsg", TestAllocReadWriteMsg},
		{"AllocReadWriteMsgCancelableContext", TestAllocReadWriteMsgCancelableContext},
		{"ReadWriteBatch", TestReadWriteBatch},
		{"ReadBatchTruncationInFlags", TestReadBatchTruncationInFlags},
		{"AllocBatch", TestAllocBatch},
		{"BusyPollReceives", TestBusyPollReceives},
		{"BusyPollDeadline", TestBusyPollDeadline},
		{"AllocBusyPoll", TestAllocBusyPoll},
		{"ConcurrentContexts", TestConcurrentContexts},
		{"ContextKeepsUserDeadline", TestContextKeepsUserDeadline},
		{"ContextStress", TestContextStress},
		{"ContextDeadlineLeftBehind", TestContextDeadlineLeftBehind},
		{"DeadlineMovedWakesRead", TestDeadlineMovedWakesRead},
		{"CloseUnblocksReadsWithAndWithoutContext", TestCloseUnblocksReadsWithAndWithoutContext},
		{"AllocWaitingRead", TestAllocWaitingRead},
		{"FullSendBufferWaits", testFullSendBufferWaits},
	} {
		t.Run(tc.name, tc.f)
	}
}

// testFullSendBufferWaits: a send that finds the send buffer full waits
// (in the kernel, for POLLOUT) until the peer reads, then goes through; a
// write deadline ends such a wait; Close ends it with net.ErrClosed.
func testFullSendBufferWaits(t *testing.T) {
	a, b := pair(t)
	msg := make([]byte, 1024)
	filled := 0
	for {
		if _, err := a.WriteMsgContext(t.Context(), msg, nil, noAddr, unix.MSG_DONTWAIT); err != nil {
			if !errors.Is(err, unix.EAGAIN) {
				t.Fatalf("filling the send buffer: %v", err)
			}
			break
		}
		filled++
	}
	if filled == 0 {
		t.Fatal("no message fit the send buffer")
	}
	// A deadline ends the wait.
	a.SetWriteDeadline(time.Now().Add(30 * time.Millisecond))
	if _, err := a.WriteMsg(msg, nil, noAddr); !isTimeout(err) {
		t.Fatalf("WriteMsg on a full buffer with a 30ms deadline: %v; want a timeout", err)
	}
	a.SetWriteDeadline(time.Time{})
	// Reading on the other side lets a waiting send through.
	errc := make(chan error, 1)
	go func() {
		_, err := a.WriteMsg(msg, nil, noAddr)
		errc <- err
	}()
	time.Sleep(20 * time.Millisecond)
	select {
	case err := <-errc:
		t.Fatalf("WriteMsg on a full buffer returned %v before the peer read", err)
	default:
	}
	buf := make([]byte, len(msg))
	for i := 0; i < filled; i++ {
		if _, _, _, _, err := b.ReadMsg(buf, nil); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("waiting WriteMsg after the peer read: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WriteMsg still waiting 5s after the peer emptied the queue")
	}
	// Close ends a waiting send.
	for {
		if _, err := a.WriteMsgContext(t.Context(), msg, nil, noAddr, unix.MSG_DONTWAIT); err != nil {
			break
		}
	}
	go func() {
		_, err := a.WriteMsg(msg, nil, noAddr)
		errc <- err
	}()
	time.Sleep(20 * time.Millisecond)
	closed := make(chan error, 1)
	go func() { closed <- a.Close() }()
	select {
	case err := <-errc:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("WriteMsg waiting while the socket closed: %v; want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WriteMsg still waiting 5s after Close")
	}
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestWaitInKernelLeavesAPFree: goroutines waiting in the kernel never
// hold every P. With one, two and three readers waiting, at GOMAXPROCS 1
// and 2, another goroutine's timers keep their pace and a garbage
// collection (which stops the world) completes promptly.
func TestWaitInKernelLeavesAPFree(t *testing.T) {
	pairsWaitInKernel = true
	defer func() { pairsWaitInKernel = false }()
	for _, procs := range []int{1, 2} {
		for _, readers := range []int{1, 2, 3} {
			t.Run(fmt.Sprintf("GOMAXPROCS=%d/readers=%d", procs, readers), func(t *testing.T) {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				var wg sync.WaitGroup
				var conns []*Conn
				for i := 0; i < readers; i++ {
					a, b := pair(t)
					conns = append(conns, a)
					wg.Add(1)
					go func() {
						defer wg.Done()
						b.ReadMsg(make([]byte, 8), nil)
					}()
				}
				time.Sleep(20 * time.Millisecond) // the readers are waiting
				start := time.Now()
				for i := 0; i < 20; i++ {
					time.Sleep(time.Millisecond)
				}
				if d := time.Since(start); d > 200*time.Millisecond {
					t.Errorf("20 sleeps of 1ms took %v while %d readers waited in the kernel", d, readers)
				}
				start = time.Now()
				runtime.GC()
				if d := time.Since(start); d > time.Second {
					t.Errorf("a garbage collection took %v while %d readers waited in the kernel", d, readers)
				}
				for _, a := range conns {
					if _, err := a.WriteMsg([]byte("x"), nil, noAddr); err != nil {
						t.Fatal(err)
					}
				}
				wg.Wait()
			})
		}
	}
}
