//go:build integration

package rdmafaults

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/go-rds/rds/barrier"
	"github.com/go-rds/rds/cmsg"
	"github.com/go-rds/rds/integration/vmtest"
)

// probeKey writes into ck every step until a write is refused or limit
// passes, checking each time that memory agrees with the status. It
// returns how long the key kept working and whether it died.
func probeKey(t *testing.T, ctx context.Context, p *pair, ck cmsg.Cookie, mem []byte, step, limit time.Duration) (time.Duration, bool, int) {
	t.Helper()
	ps := os.Getpagesize()
	sreg := newRegion(t, ps)
	defer sreg.Close()
	start := time.Now()
	for n := 1; ; n++ {
		v := byte(n)
		fillByte(sreg.Bytes(), v)
		st := p.write(t, ctx, ck, 0, sreg.Span(0, ps), "probe", 10*time.Second)
		if st != barrier.Success {
			if allByte(mem, v) {
				t.Fatalf("refused probe %d (%v) changed memory", n, st)
			}
			return time.Since(start), true, n - 1
		}
		if !allByte(mem, v) {
			t.Fatalf("probe %d succeeded but memory does not hold it", n)
		}
		p.client.drain(time.Millisecond)
		if time.Since(start) > limit {
			return time.Since(start), false, n
		}
		time.Sleep(step)
	}
}

// TestKeyLifetime measures how long a key keeps accepting RDMA WRITEs
// after the owner gave it up: freed with invalidation, used once
// (RDS_RDMA_USE_ONCE), or with the owner's socket closed.
func TestKeyLifetime(t *testing.T) {
	vmtest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ps := os.Getpagesize()
	const limit = 8 * time.Second
	for _, how := range []string{"freed", "used-once", "socket-closed"} {
		p := newPair(t, ctx)
		creg := newRegion(t, ps)
		t.Cleanup(func() { creg.Close() })
		flags := cmsg.FlagReadWrite | cmsg.FlagInvalidate
		if how == "used-once" {
			flags |= cmsg.FlagUseOnce
		}
		mr, ck := p.register(t, ctx, creg.Span(0, ps), flags)
		switch how {
		case "freed":
			mr.Free()
		case "used-once":
			sreg := newRegion(t, ps)
			if st := p.write(t, ctx, ck, 0, sreg.Span(0, ps), "use", 10*time.Second); st != barrier.Success {
				t.Fatalf("use: %v", st)
			}
			p.client.recv(t, "use", 10*time.Second)
			sreg.Close()
		case "socket-closed":
			p.client.close()
		}
		alive, died, n := probeKey(t, ctx, p, ck, creg.Bytes(), 250*time.Millisecond, limit)
		var c tally
		c.ops, c.success = n+1, n
		if died {
			c.remote = 1
		}
		out := fmt.Sprintf("key %s: %d late writes landed over %v; refused: %v", how, n, alive.Round(time.Millisecond), died)
		t.Log(out)
		reliability(t, "key-lifetime/"+how, c, out)
		if how == "socket-closed" {
			mr.Free()
		}
	}
}
