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

func TestWakeArgs(t *testing.T) {
	if m, k, n, err := wakeArgs([]string{"distinct", "400", "10"}); err != nil || m != "distinct" || k != 400 || n != 10 {
		t.Errorf("wakeArgs(distinct 400 10) = %q, %d, %d, %v", m, k, n, err)
	}
	for _, bad := range [][]string{
		{"distinct", "401", "10"}, // more functions than there are
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
	if len(rep.WakeCode) != 6 {
		t.Fatalf("%d configurations measured, want 6: %+v", len(rep.WakeCode), rep.WakeCode)
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
		"| C | 3 | 3.00 | 20.0 | 55.0 | 42.5 | 130 | 18% |", // (20-3)/400 us and (55-3)/400 us per call; spread 10/55
		"| Go | 3 | 8.00 | 33.0 | 128 | 62.5 | 300 | 16% |",
		"cost 3.059 times a repeated call in C and 4.800 times in Go, and such a call cost Go 2.308 times what it cost C",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md)
		}
	}
	// Without both languages measured, no sentence compares them.
	rep.WakeCode = rep.WakeCode[:3]
	if md := rep.Markdown(Meta{}); !strings.Contains(md, "| C | 3 |") || strings.Contains(md, "In this run") {
		t.Errorf("with C alone:\n%s", md)
	}
}
