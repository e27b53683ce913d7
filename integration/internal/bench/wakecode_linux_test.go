//go:build linux

package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMain lets the test binary play a Go worker, as rdsbench does
// ("rdsbench worker ROLE ..."): "bench.test worker ROLE ...".
func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == "worker" {
		if err := Worker(os.Args[2], os.Args[3:], os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// The Go functions are those of cbaseline/wakecode.c: f100 to f499, fN(x)
// being x+N if x&(N%7+1) != 0, else x^(N*17).
func TestWakeFuncs(t *testing.T) {
	if len(wakeFuncs) != 400 {
		t.Fatalf("%d functions, want 400", len(wakeFuncs))
	}
	for i, f := range wakeFuncs {
		n := int64(100 + i)
		for _, x := range []int64{0, 1, 2, 7, 8, 1234567} {
			want := x ^ n*17
			if x&(n%7+1) != 0 {
				want = x + n
			}
			if got := f(x); got != want {
				t.Fatalf("f%d(%d) = %d, want %d", n, x, got, want)
			}
		}
	}
}

// wakeInline is f100 to f499 applied in turn, without the calls.
func TestWakeInline(t *testing.T) {
	for _, x := range []int64{0, 1, 2, 7, 8, 1234567} {
		want := x
		for _, f := range wakeFuncs {
			want = f(want)
		}
		if got := wakeInline(x); got != want {
			t.Errorf("wakeInline(%d) = %d, want %d", x, got, want)
		}
	}
}

func TestWakeArgs(t *testing.T) {
	if m, k, n, err := wakeArgs([]string{"distinct", "400", "10"}); err != nil || m != "distinct" || k != 400 || n != 10 {
		t.Errorf("wakeArgs(distinct 400 10) = %q, %d, %d, %v", m, k, n, err)
	}
	if m, k, _, err := wakeArgs([]string{"inlined", "400", "10"}); err != nil || m != "inlined" || k != 400 {
		t.Errorf("wakeArgs(inlined 400 10) = %q, %d, %v", m, k, err)
	}
	for _, bad := range [][]string{
		{"distinct", "401", "10"}, // more functions than there are
		{"inlined", "5", "10"},    // all of them or none
		{"repeated", "-1", "10"},
		{"repeated", "5", "0"},
		{"sometimes", "5", "10"},
		{"repeated", "5"},
	} {
		if _, _, _, err := wakeArgs(bad); err == nil {
			t.Errorf("wakeArgs(%q) gave no error", bad)
		}
	}
}

// The whole measurement on the host: both sides, every configuration,
// one round, and the section it makes.
func TestWakeCode(t *testing.T) {
	cbin := filepath.Join(t.TempDir(), "wakecode-c")
	if out, err := exec.Command("gcc", "-O2", "-Wall", "-Wextra", "-Werror", "-o", cbin, "cbaseline/wakecode.c").CombinedOutput(); err != nil {
		t.Fatalf("gcc (install gcc): %v\n%s", err, out)
	}
	var log strings.Builder
	d := &driver{cfg: &Config{GoBinary: os.Args[0], GoArgs: []string{"worker"}, WakeC: cbin, WakeRounds: 1, Log: &log}}
	rep := &Report{}
	d.wakeCode(rep)
	if len(rep.Failures) > 0 {
		t.Fatalf("failures: %q\n%s", rep.Failures, log.String())
	}
	if len(rep.WakeCode) != 8 {
		t.Fatalf("%d configurations measured, want 8: %+v", len(rep.WakeCode), rep.WakeCode)
	}
	for _, c := range rep.WakeCode {
		if len(c.UserUS) != 1 || c.UserUS[0] < 0 {
			t.Errorf("%s %s k=%d: %v", c.Lang, c.Mode, c.K, c.UserUS)
		}
	}
	md := rep.Markdown(Meta{})
	for _, want := range []string{"## What the VM charges for code", "| C | 1 |", "| Go | 1 |", "wakecode.c", "In this run a call"} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md)
		}
	}
}

// The worker role as rdsbench runs it prints its result; its answering
// process refuses arguments that the parent would have refused.
func TestWakeCodeWorker(t *testing.T) {
	out, err := exec.Command(os.Args[0], "worker", "wakecode", "distinct", "5", "10").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "RESULT user_us=") || !strings.Contains(string(out), " msgs=10") {
		t.Errorf("wakecode distinct 5 10: %v, %s", err, out)
	}
	out, err = exec.Command(os.Args[0], "worker", "wakecode", "inlined", "400", "10").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "RESULT user_us=") {
		t.Errorf("wakecode inlined 400 10: %v, %s", err, out)
	}
	out, err = exec.Command(os.Args[0], "worker", "wakecode", "echo", "distinct", "999", "10").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "K must be") {
		t.Errorf("echo with K=999: %v, %s", err, out)
	}
}

func TestWakeCodeMarkdown(t *testing.T) {
	rep := &Report{WakeCode: []WakeCost{
		{"C", "repeated", 0, []float64{3, 2, 4}}, {"C", "repeated", 400, []float64{20, 19, 22}}, {"C", "distinct", 400, []float64{55, 50, 60}},
		{"Go", "repeated", 0, []float64{8, 8, 9}}, {"Go", "repeated", 400, []float64{33, 30, 34}}, {"Go", "distinct", 400, []float64{128, 120, 140}},
	}}
	md := rep.Markdown(Meta{})
	for _, want := range []string{
		"| C | 3 | 3.00 | 20.0 | 55.0 | - | 42.5 | 130 | - | 18% |", // (20-3)/400 us and (55-3)/400 us per call; spread 10/55
		"| Go | 3 | 8.00 | 33.0 | 128 | - | 62.5 | 300 | - | 16% |",
		"cost 3.059 times a repeated call in C and 4.800 times in Go, and such a call cost Go 2.308 times what it cost C",
		"Every instruction that a Go side runs", // no inlined rows: nothing tells calls from instructions
	} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md)
		}
	}
	// Inlined bodies that cost little next to a distinct call: the calls
	// are what costs.
	rep.WakeCode = append(rep.WakeCode, WakeCost{"C", "inlined", 400, []float64{7, 6, 8}}, WakeCost{"Go", "inlined", 400, []float64{14, 12, 16}})
	md = rep.Markdown(Meta{})
	for _, want := range []string{
		"| C | 3 | 3.00 | 20.0 | 55.0 | 7.00 | 42.5 | 130 | 10.0 | 18% |", // (7-3)/400 us per body
		"| Go | 3 | 8.00 | 33.0 | 128 | 14.0 | 62.5 | 300 | 15.0 | 16% |",
		"the same code cost 10.0 ns per body in C and 15.0 ns in Go: 0.077 and 0.050 of a distinct call",
		"in its calls and returns far more than in its instructions",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md)
		}
	}
	// A run with the bodies that took no longer than the one without.
	rep.WakeCode[7].UserUS = []float64{7, 8, 9}
	if md := rep.Markdown(Meta{}); !strings.Contains(md, "10.0 ns per body in C and nothing measurable in Go") {
		t.Errorf("with Go's inlined bodies at no cost:\n%s", md)
	}
	// Inlined bodies that cost as much as the calls: the instructions are.
	rep.WakeCode[7].UserUS = []float64{40, 40, 40}
	if md := rep.Markdown(Meta{}); strings.Contains(md, "in its calls and returns") || !strings.Contains(md, "Every instruction that a Go side runs") {
		t.Errorf("with Go's inlined bodies as dear as its calls:\n%s", md)
	}
	// Without both languages measured, no sentence compares them.
	rep.WakeCode = rep.WakeCode[:3]
	if md := rep.Markdown(Meta{}); !strings.Contains(md, "| C | 3 |") || strings.Contains(md, "In this run") {
		t.Errorf("with C alone:\n%s", md)
	}
}
