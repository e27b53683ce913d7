//go:build linux

package barrier

import (
	"flag"
	"testing"

	"github.com/go-rds/rds/cmsg"
)

// burstRelease is a Releaser that counts its calls, standing in for the
// buffer record rdmaops hands the tracker.
type burstRelease struct{ n int }

func (r *burstRelease) Release(Completion) { r.n++ }

// statusBurst builds one receive's worth of RDMA_STATUS notices for the
// tokens first..first+n-1, in reverse order when reverse is set.
func statusBurst(buf []byte, first Token, n int, reverse bool) []byte {
	bl := cmsg.NewBuilder(buf[:0])
	for i := range n {
		tok := first + Token(i)
		if reverse {
			tok = first + Token(n-1-i)
		}
		bl.RDMAStatus(cmsg.Notify{UserToken: uint64(tok), Status: cmsg.StatusSuccess})
	}
	out, _ := bl.Finish()
	return out
}

// benchBurst begins depth operations, then resolves them all from one
// control buffer, as a pipelined initiator does per receive.
func benchBurst(b *testing.B, depth int, reverse bool, cfg *Config) {
	tr := New(cfg)
	defer tr.Close()
	rel := new(burstRelease)
	keep := new([4096]byte)
	buf := make([]byte, 0, depth*cmsg.RDMAStatusSpace)
	b.ReportAllocs()
	for b.Loop() {
		first := tr.Begin(Entry{Keep: keep, Release: rel})
		for range depth - 1 {
			tr.Begin(Entry{Keep: keep, Release: rel})
		}
		n, err := tr.Process(statusBurst(buf, first, depth, reverse))
		if err != nil || n != depth {
			b.Fatalf("Process = %d, %v; want %d", n, err, depth)
		}
		if cfg != nil && cfg.Completions > 0 {
			for range depth {
				<-tr.Completions()
			}
		}
	}
	b.StopTimer()
	if tr.Outstanding() != 0 || tr.HighWater() != tr.Last() {
		b.Fatalf("outstanding %d, high water %d of %d", tr.Outstanding(), tr.HighWater(), tr.Last())
	}
	if uint64(rel.n) != tr.Stats().Begun {
		b.Fatalf("%d releases for %d operations", rel.n, tr.Stats().Begun)
	}
}

// BenchmarkProcessBurst16 resolves 16 completions per Process call, in
// order: the queue-depth-16 RDMA workload's receive path.
func BenchmarkProcessBurst16(b *testing.B) { benchBurst(b, 16, false, &Config{Capacity: 64}) }

// BenchmarkProcessBurst16Reverse resolves them newest first, so the high
// water mark moves only at the last one.
func BenchmarkProcessBurst16Reverse(b *testing.B) { benchBurst(b, 16, true, &Config{Capacity: 64}) }

// BenchmarkProcessBurst16Channel also delivers every completion on the
// Completions channel.
func BenchmarkProcessBurst16Channel(b *testing.B) {
	benchBurst(b, 16, false, &Config{Capacity: 64, Completions: 16})
}

// BenchmarkProcessOneAtATime is queue depth 1: one Begin, one notice.
func BenchmarkProcessOneAtATime(b *testing.B) { benchBurst(b, 1, false, &Config{Capacity: 64}) }

// TestBurstBenchmarksDoNotAllocate keeps the completion path of the
// benchmarks above at zero allocations in the plain test run.
func TestBurstBenchmarksDoNotAllocate(t *testing.T) {
	// A few hundred iterations are enough to see an allocation; restore
	// the flag for any benchmarks run after the tests.
	old := flag.Lookup("test.benchtime").Value.String()
	if err := flag.Set("test.benchtime", "300x"); err != nil {
		t.Fatal(err)
	}
	defer flag.Set("test.benchtime", old)
	for _, bm := range []struct {
		name string
		f    func(*testing.B)
	}{
		{"ProcessBurst16", BenchmarkProcessBurst16},
		{"ProcessBurst16Reverse", BenchmarkProcessBurst16Reverse},
		{"ProcessBurst16Channel", BenchmarkProcessBurst16Channel},
		{"ProcessOneAtATime", BenchmarkProcessOneAtATime},
	} {
		r := testing.Benchmark(bm.f)
		if r.N == 0 {
			t.Errorf("%s failed", bm.name)
			continue
		}
		if a := r.AllocsPerOp(); a != 0 {
			t.Errorf("%s: %d allocations per op, want 0", bm.name, a)
		}
	}
}
