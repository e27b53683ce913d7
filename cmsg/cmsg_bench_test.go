//go:build linux

package cmsg

import (
	"flag"
	"io"
	"testing"
)

// The benchmarks below follow the hot paths of package bench's workloads:
// an RDMA request built per operation, a burst of completion notices as
// a queue depth of 16 returns them, and a data message carrying a receive
// timestamp. Each checks what it decoded, so a broken codec fails them.

// BenchmarkBuildRDMAWrite builds the control data of one RDMA WRITE with
// notify into a reused buffer, as rdmaops.Conn.Do does per operation.
func BenchmarkBuildRDMAWrite(b *testing.B) {
	buf := make([]byte, 0, RDMAArgsSpace)
	var bl Builder
	args := RDMAArgs{
		Cookie:       MakeCookie(0x1234, 0),
		Remote:       IOVec{Addr: 16 << 10, Bytes: 16 << 10},
		LocalVecAddr: 0x7f0000001000,
		NumLocal:     1,
		Flags:        FlagReadWrite | FlagNotifyMe,
	}
	b.ReportAllocs()
	for b.Loop() {
		args.UserToken++
		bl.Reset(buf[:0])
		bl.RDMAArgs(args)
		out, err := bl.Finish()
		if err != nil || len(out) != RDMAArgsSpace {
			b.Fatalf("Finish = %d bytes, %v", len(out), err)
		}
	}
}

// BenchmarkParseStatusBurst16 decodes 16 RDMA_STATUS notices from one
// receive, what a pipelined initiator with 16 operations in flight gets.
func BenchmarkParseStatusBurst16(b *testing.B) {
	bl := NewBuilder(make([]byte, 0, 16*RDMAStatusSpace))
	for i := range 16 {
		bl.RDMAStatus(Notify{UserToken: uint64(i + 1), Status: StatusSuccess})
	}
	buf, _ := bl.Finish()
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		p := NewParser(buf)
		var sum uint64
		for {
			m, err := p.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			n, err := m.RDMAStatus()
			if err != nil || n.Status != StatusSuccess {
				b.Fatalf("RDMAStatus = %+v, %v", n, err)
			}
			sum += n.UserToken
		}
		if sum != 16*17/2 {
			b.Fatalf("token sum %d, want %d", sum, 16*17/2)
		}
	}
}

// BenchmarkParseTimestamp decodes the SCM_TIMESTAMP of one data message,
// the receive path with SO_TIMESTAMP on.
func BenchmarkParseTimestamp(b *testing.B) {
	bl := NewBuilder(make([]byte, 0, MaxReceiveSpace))
	bl.Timestamp(Timeval{Sec: 1_700_000_000, Usec: 123456})
	buf, _ := bl.Finish()
	b.ReportAllocs()
	for b.Loop() {
		p := NewParser(buf)
		m, err := p.Next()
		if err != nil || !m.Is(LevelSocket, TypeTimestamp) {
			b.Fatalf("Next = %+v, %v", m, err)
		}
		tv, err := m.Timestamp()
		if err != nil || tv.Usec != 123456 {
			b.Fatalf("Timestamp = %+v, %v", tv, err)
		}
	}
}

// BenchmarkParseMaxReceive decodes a full MaxReceiveSpace buffer: a cookie,
// a timestamp, a receive-path trace and a zero-copy completion.
func BenchmarkParseMaxReceive(b *testing.B) {
	bl := NewBuilder(make([]byte, 0, MaxReceiveSpace))
	bl.RDMADest(MakeCookie(7, 0))
	bl.Timestamp(Timeval{Sec: 1, Usec: 2})
	bl.RxPathLatency(testRxTrace)
	bl.ZeroCopyCompletion(testZcopy)
	buf, err := bl.Finish()
	// The _OLD timestamp is smaller than TimevalSpace on 32-bit ABIs.
	if err != nil || len(buf) > MaxReceiveSpace || (Alignment == 8 && len(buf) != MaxReceiveSpace) {
		b.Fatalf("built %d bytes, %v; want %d", len(buf), err, MaxReceiveSpace)
	}
	b.ReportAllocs()
	for b.Loop() {
		p := NewParser(buf)
		n := 0
		for {
			m, err := p.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			if err := decodeReceived(m); err != nil {
				b.Fatal(err)
			}
			n++
		}
		if n != 4 {
			b.Fatalf("decoded %d messages, want 4", n)
		}
	}
}

// decodeReceived applies the typed decoder of each type a data message can
// carry.
func decodeReceived(m Message) error {
	var err error
	if m.Is(LevelRDS, TypeRDMADest) {
		_, err = m.RDMADest()
	} else if m.Is(LevelSocket, TypeTimestamp) {
		_, err = m.Timestamp()
	} else if m.Is(LevelRDS, TypeRxPathLatency) {
		_, err = m.RxPathLatency()
	} else if m.Is(LevelRDS, TypeZeroCopyCompletion) {
		_, err = m.ZeroCopyCompletion()
	}
	return err
}

// TestBenchPathsDoNotAllocate locks the benchmarks' hot paths at zero
// allocations, so that a regression fails the plain test run too.
func TestBenchPathsDoNotAllocate(t *testing.T) {
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
		{"BuildRDMAWrite", BenchmarkBuildRDMAWrite},
		{"ParseStatusBurst16", BenchmarkParseStatusBurst16},
		{"ParseTimestamp", BenchmarkParseTimestamp},
		{"ParseMaxReceive", BenchmarkParseMaxReceive},
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
