package barrier_test

import (
	"context"
	"fmt"
	"time"

	"github.com/go-rds/rds/barrier"
)

// Operations complete out of order; the high-water mark rises only over an
// unbroken run of completed tokens, failed ones included.
func ExampleTracker() {
	tr := barrier.New(nil)
	a := tr.Begin(barrier.Entry{})
	b := tr.Begin(barrier.Entry{})
	c := tr.Begin(barrier.Entry{})

	tr.Complete(b, barrier.Success)
	fmt.Println("after b:", tr.HighWater())
	tr.Complete(a, barrier.RemoteError)
	fmt.Println("after a:", tr.HighWater())
	tr.Complete(c, barrier.Success)
	fmt.Println("after c:", tr.HighWater(), tr.Status(a))
	// Output:
	// after b: 0
	// after a: 2
	// after c: 3 remote error
}

// WaitAll is the barrier: it returns once every operation up to the token
// is locally complete.
func ExampleTracker_WaitAll() {
	tr := barrier.New(nil)
	var last barrier.Token
	for range 3 {
		last = tr.Begin(barrier.Entry{})
	}
	go func() {
		for tok := last; tok >= 1; tok-- {
			tr.Complete(tok, barrier.Success)
		}
	}()
	if err := tr.WaitAll(context.Background(), last); err != nil {
		fmt.Println(err)
	}
	fmt.Println("mark:", tr.HighWater())
	// Output: mark: 3
}

// An operation whose status never arrives times out: it is reported at its
// deadline, but its memory stays quarantined (the mark does not pass it)
// until the kernel's late status says the transfer is over.
func ExampleEntry_deadline() {
	tr := barrier.New(&barrier.Config{Completions: 1})
	defer tr.Close()
	buf := make([]byte, 4096)
	tok := tr.Begin(barrier.Entry{Deadline: time.Now().Add(10 * time.Millisecond), Keep: &buf})
	c := <-tr.Completions()
	fmt.Println(c.Token == tok, c.Status, c.Keep == &buf, tr.HighWater(), tr.Stats().Quarantined)
	tr.Complete(tok, barrier.Canceled) // the late status, as Process applies it
	fmt.Println(tr.Status(tok), tr.HighWater(), tr.Stats().Quarantined, tr.Stats().Late)
	// Output:
	// true timed out true 0 1
	// timed out 1 0 1
}

// Wait blocks for one operation.
func ExampleTracker_Wait() {
	tr := barrier.New(nil)
	tok := tr.Begin(barrier.Entry{})
	go tr.Complete(tok, barrier.Dropped)
	st, err := tr.Wait(context.Background(), tok)
	fmt.Println(st, err, st.Err())
	// Output: dropped <nil> barrier: RDMA operation dropped (connection went down)
}

// Cancel wraps the call that makes the kernel give up operations
// (rdssock's CancelSentTo): statuses read meanwhile are reported, but
// memory is released only once the call returned, when the adapter is done
// with it. OnRelease tells when memory comes back.
func ExampleTracker_Cancel() {
	tr := barrier.New(&barrier.Config{OnRelease: func(c barrier.Completion) {
		fmt.Println("released", c.Token, c.Status)
	}})
	tok := tr.Begin(barrier.Entry{})
	tr.Cancel(func() error {
		// In a program: return sock.CancelSentTo(peer). The kernel
		// reports the operation canceled while the call still waits.
		tr.Complete(tok, barrier.Canceled)
		fmt.Println("during the call:", tr.Status(tok), tr.HighWater())
		return nil
	})
	fmt.Println("after the call:", tr.HighWater())
	// Output:
	// during the call: canceled 0
	// released 1 canceled
	// after the call: 1
}
