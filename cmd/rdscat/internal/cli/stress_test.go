//go:build linux

package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-rds/rds/barrier"
	"golang.org/x/sys/unix"
)

func TestRDMAPattern(t *testing.T) {
	for _, n := range []int{1, 7, 8, 13, 4096, 8192 + 5} {
		b := make([]byte, n)
		seed := rdmaSeed(7, 3, 'w', 42, 0)
		fillRDMA(b, seed)
		if !checkRDMA(b, seed) {
			t.Fatalf("%d bytes: the pattern does not check against its own seed", n)
		}
		if checkRDMA(b, rdmaSeed(7, 3, 'w', 43, 0)) {
			t.Fatalf("%d bytes: the pattern of op 42 passes as op 43's", n)
		}
		for _, i := range []int{0, n / 2, n - 1} {
			b[i] ^= 0x10
			if checkRDMA(b, seed) {
				t.Fatalf("%d bytes: a flipped bit at %d went unnoticed", n, i)
			}
			b[i] ^= 0x10
		}
	}
	// Words must depend on their position: a buffer whose halves are
	// swapped must fail.
	b := make([]byte, 64)
	fillRDMA(b, 1)
	sw := append(append([]byte{}, b[32:]...), b[:32]...)
	if checkRDMA(sw, 1) {
		t.Fatal("swapped halves pass")
	}
	// The seeds of different tasks, runs, kinds and generations differ.
	seen := map[uint64]int{}
	for _, c := range []struct {
		run  uint32
		task uint16
		kind byte
		a, b uint64
	}{{1, 0, 'w', 0, 0}, {2, 0, 'w', 0, 0}, {1, 1, 'w', 0, 0}, {1, 0, 'r', 0, 0}, {1, 0, 'r', 0, 1}, {1, 0, 'r', 1, 0}, {1, 0, 'w', 1, 0}} {
		s := rdmaSeed(c.run, c.task, c.kind, c.a, c.b)
		if prev, ok := seen[s]; ok {
			t.Fatalf("seed collision between case %d and %+v", prev, c)
		}
		seen[s] = len(seen)
	}
}

func TestRDMAHello(t *testing.T) {
	var b [helloLen]byte
	msg := putHello(b[:], stressHdr{typ: typeRDMAHello, task: 3, run: 9, aux: 16}, rdmaOpRead, true, 12345)
	var h stressHdr
	if !h.parse(msg) || h.typ != typeRDMAHello || h.task != 3 || h.run != 9 || h.aux != 16 {
		t.Fatalf("header %+v", h)
	}
	op, verify, size, ok := parseHello(msg)
	if !ok || op != rdmaOpRead || !verify || size != 12345 {
		t.Fatalf("body: op %d verify %v size %d ok %v", op, verify, size, ok)
	}
	if _, _, _, ok := parseHello(msg[:stressHeader]); ok {
		t.Fatal("a hello without a body parses")
	}
	for _, c := range []struct {
		op          uint8
		size, depth int
		want        string
	}{
		{rdmaOpWrite, 4096, 8, ""},
		{rdmaOpRead, 1 << 20, 1, ""},
		{3, 4096, 8, "unknown RDMA operation 3"},
		{rdmaOpWrite, 0, 8, "RDMA size 0"},
		{rdmaOpWrite, 1<<20 + 1, 8, "RDMA size 1048577"},
		{rdmaOpWrite, 4096, 0, "depth 0"},
		{rdmaOpWrite, 4096, 5000, "depth 5000"},
		{rdmaOpWrite, 1 << 20, 300, "exceed the receiver's limit"},
	} {
		got := checkHello(c.op, c.size, c.depth)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("checkHello(%d, %d, %d) = %q, want %q", c.op, c.size, c.depth, got, c.want)
		}
	}
}

// liveRE is the live line of a run with both ends.
var liveRE = regexp.MustCompile(`^ +(\d+)s  sent +(\d+) msg/s +([\d.]+) MB/s  in-flight +(\d+)  congested (\d+)  errors (\d+)  received +(\d+) msg/s +([\d.]+) MB/s$`)

func TestLiveLine(t *testing.T) {
	prev := liveSnap{sender: true, receiver: true, sent: 1000, sentBytes: 1_000_000, recv: 990, recvBytes: 990_000}
	cur := liveSnap{sender: true, receiver: true, sent: 3500, sentBytes: 3_500_000, inflight: 12, congested: 4, errs: 1, recv: 3480, recvBytes: 3_480_000}
	line := liveLine(7, cur, prev)
	m := liveRE.FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("line %q does not match %v", line, liveRE)
	}
	want := []string{"7", "2500", "2.50", "12", "4", "1", "2490", "2.49"}
	for i, w := range want {
		if m[i+1] != w {
			t.Errorf("field %d of %q = %s, want %s", i+1, line, m[i+1], w)
		}
	}
	// A sender alone shows no receive rates, a receiver alone no send
	// fields.
	if l := liveLine(1, liveSnap{sender: true, sent: 5}, liveSnap{sender: true}); strings.Contains(l, "received") || !strings.Contains(l, "sent        5 msg/s") {
		t.Errorf("sender-only line %q", l)
	}
	if l := liveLine(1, liveSnap{receiver: true, recv: 5}, liveSnap{receiver: true}); strings.Contains(l, "sent") || !strings.Contains(l, "received        5 msg/s") {
		t.Errorf("receiver-only line %q", l)
	}
}

func TestIsTerminal(t *testing.T) {
	var sb strings.Builder
	if isTerminal(&sb) {
		t.Fatal("a strings.Builder is a terminal")
	}
}

func TestRDMAStatusSummary(t *testing.T) {
	rt := &rdmaTask{}
	rt.status[barrier.Success].Add(97)
	rt.status[barrier.RemoteError].Add(2)
	rt.status[barrier.TimedOut].Add(1)
	if got, want := rt.failures(), "2 remote error, 1 timed out"; got != want {
		t.Errorf("failures() = %q, want %q", got, want)
	}
	var sb strings.Builder
	printRDMASender(&sb, &senderReport{Acked: 97}, &rdmaSenderReport{
		Op: "read", Size: 8192, Verify: true, Verified: 96, VerifyErrors: 1,
		Status: map[string]uint64{"success": 97, "remote error": 2, "timed out": 1},
	})
	want := "  rdma      read of 8192 bytes, 97 completed: remote error 2 success 97 timed out 1; 0 registrations by the sender\n" +
		"  verify    96 READs checked, 1 wrong\n"
	if sb.String() != want {
		t.Errorf("summary\n%q, want\n%q", sb.String(), want)
	}
}

// TestMonoNowIsClockMonotonic: stress stamps messages with monoNow, which
// reads CLOCK_MONOTONIC through the runtime's clock; it must stay within a
// little of the system call's reading, before and after a sleep.
func TestMonoNowIsClockMonotonic(t *testing.T) {
	sys := func() int64 {
		var ts unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
			t.Fatal(err)
		}
		return ts.Nano()
	}
	for i := range 3 {
		if i > 0 {
			time.Sleep(20 * time.Millisecond)
		}
		before := sys()
		m := monoNow()
		after := sys()
		const slack = int64(time.Millisecond)
		if m < before-slack || m > after+slack {
			t.Fatalf("monoNow %d, CLOCK_MONOTONIC %d..%d", m, before, after)
		}
	}
}

func TestStartCPUProfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.pprof")
	stop, err := startCPUProfile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := startCPUProfile(filepath.Join(t.TempDir(), "second.pprof")); err == nil {
		t.Error("a second profile started while the first runs")
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatalf("the profile is not a gzipped pprof file: % x", b[:min(len(b), 8)])
	}
	if _, err := startCPUProfile(filepath.Join(t.TempDir(), "no", "such", "dir")); err == nil || !strings.Contains(err.Error(), "-cpuprofile") {
		t.Errorf("a profile in a missing directory: %v, want an error naming -cpuprofile", err)
	}
}
