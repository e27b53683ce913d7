//go:build linux

package main

import (
	"math"
	"slices"
	"testing"
)

// A callgrind_annotate listing (valgrind 3.19, --inclusive=no --tree=none
// --auto=no), cut down.
const annotated = `--------------------------------------------------------------------------------
Ir                 
--------------------------------------------------------------------------------
2,359,098 (100.0%)  PROGRAM TOTALS

--------------------------------------------------------------------------------
Ir               file:function
--------------------------------------------------------------------------------
77,777 ( 3.30%)  ???:x_cgo_sigaction [/tmp/wc/rdssock.test]
56,364 ( 2.39%)  /work/main/rdssock/msg_linux.go:github.com/go-rds/rds/rdssock.(*Conn).readMsg [/tmp/wc/rdssock.test]
 1,000 ( 0.04%)  /work/main/rdssock/msg_linux.go:github.com/go-rds/rds/rdssock.(*Conn).readMsg
43,477 ( 1.84%)  ./stdio-common/./stdio-common/vfscanf-internal.c:__vfscanf_internal [/usr/lib/x86_64-linux-gnu/libc.so.6]
   500 ( 0.02%)  ???:0x0000000000001050 [/tmp/wc/recvwait]
`

func TestParseAnnotate(t *testing.T) {
	got := parseAnnotate([]byte(annotated))
	want := map[string]int64{
		"x_cgo_sigaction": 77777,
		"github.com/go-rds/rds/rdssock.(*Conn).readMsg": 57364, // one function under two names of its file
		"__vfscanf_internal":                            43477,
		"0x0000000000001050":                            500,
	}
	if len(got) != len(want) {
		t.Errorf("parsed %d functions, want %d: %v", len(got), len(want), got)
	}
	for fn, n := range want {
		if got[fn] != n {
			t.Errorf("%s: %d, want %d", fn, got[fn], n)
		}
	}
}

func TestPerMessage(t *testing.T) {
	a := map[string]int64{"f": 1000, "g": 500, "h": 70}
	b := map[string]int64{"f": 5000, "g": 900, "h": 70, "new": 800}
	got := perMessage(a, b, 400, 3)
	want := []string{"     10.0 f", "      2.0 new", "      1.0 g"}
	if !slices.Equal(got, want) {
		t.Errorf("perMessage = %q, want %q", got, want)
	}
}

// All calls count, or with a --toggle-collect pattern those within the
// function it names: the calls of it, its own and its callees', not
// descending into the Go runtime.
func TestCallgrindCalls(t *testing.T) {
	data := "events: Ir\nfn=(1) main\n16 3\ncfn=(2) pkg.(*C).send\ncalls=2 20\n+1 40\ncfn=(3) time.Sleep\ncalls=7 30\n* 0\n" +
		"fn=(2)\n20 20\ncfn=(4) raw\ncalls=3 5\n-3 4\ncfn=(5) runtime.lock\ncalls=1 9\n* 2\n" +
		"fn=(3)\n5 1\ncfn=(5)\ncalls=9 1\n* 2\nfn=(5)\n1 1\ncfn=(6) runtime.futex\ncalls=4 1\n* 1\n\ntotals: 63\n"
	if got := callgrindCalls([]byte(data), ""); got != 26 {
		t.Errorf("callgrindCalls without a pattern = %d, want 26", got)
	}
	// 2 of send, 3 of raw and 1 of runtime.lock from send; not lock's own
	// calls, nor the 9 from time.Sleep.
	if got := callgrindCalls([]byte(data), "*.(?C).send"); got != 6 {
		t.Errorf("callgrindCalls of send = %d, want 6", got)
	}
	if got := callgrindCalls([]byte("calls=\ncalls=x 1\n"), ""); got != 0 {
		t.Errorf("callgrindCalls of a cut file = %d, want 0", got)
	}
}

func TestCallgrindTotal(t *testing.T) {
	n, err := callgrindTotal([]byte("events: Ir\nfl=x\nfn=y\n1 2\nsummary: 1467868\n\n\ntotals: 1467868\n"))
	if err != nil || n != 1467868 {
		t.Errorf("callgrindTotal = %d, %v", n, err)
	}
	if _, err := callgrindTotal([]byte("events: Ir\n")); err == nil {
		t.Error("a file without totals gave no error")
	}
}

func TestMedianSpread(t *testing.T) {
	for _, c := range []struct {
		in             []float64
		median, spread float64
	}{
		{[]float64{120, 100, 110}, 110, 20.0 / 110},
		{[]float64{100, 140, 120, 110}, 115, 40.0 / 115},
		{[]float64{50}, 50, 0},
	} {
		m, s := medianSpread(c.in)
		if m != c.median || math.Abs(s-c.spread) > 1e-12 {
			t.Errorf("medianSpread(%v) = %v, %v; want %v, %v", c.in, m, s, c.median, c.spread)
		}
	}
}
