//go:build linux

package rdmaops

import (
	"sync"
	"sync/atomic"
	"testing"
)

// TestReusableHandsOutOnce: values put back into a reusable come out
// again, and while goroutines get and put concurrently no value is held by
// two of them at once (each marks the value it holds and checks that
// nobody else had marked it).
func TestReusableHandsOutOnce(t *testing.T) {
	type item struct{ holders atomic.Int32 }
	var made atomic.Int32
	var r reusable[item]
	r.pool.New = func() any { made.Add(1); return new(item) }

	x := r.get()
	r.put(x)
	if y := r.get(); y != x {
		t.Fatal("the value just put back did not come out of the slot")
	}
	r.put(x)

	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 2000 {
				v := r.get()
				if n := v.holders.Add(1); n != 1 {
					t.Errorf("a value was handed out to %d holders at once", n)
				}
				v.holders.Add(-1)
				r.put(v)
			}
		}()
	}
	wg.Wait()
	if made.Load() > 9 {
		t.Logf("%d values made for 8 goroutines", made.Load())
	}
}
