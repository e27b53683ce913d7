package bench

import (
	"math"
	"testing"
)

func TestParseProcStat(t *testing.T) {
	// A command name with a space and parentheses of its own: the fields
	// are counted from the last ')'.
	line := "4242 (rds (x) cat) S 17 4242 4242 0 -1 4194560 311 0 0 0 123 45 0 0 20 0 3 0 100 1000 200\n"
	ps, err := parseProcStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if want := (procStat{PID: 4242, PPID: 17, UTime: 123, STime: 45}); ps != want {
		t.Fatalf("parseProcStat = %+v, want %+v", ps, want)
	}
	for _, bad := range []string{
		"",
		"4242 rdscat S 1 2 3",                // no parentheses
		"x (a) S 1 2 3 4 5 6 7 8 9 10 11 12", // pid not a number
		"1 (a) S 1 2 3",                      // too few fields
		"1 (a) S 1 2 3 4 5 6 7 8 9 10 u 12",  // utime not a number
	} {
		if _, err := parseProcStat([]byte(bad)); err == nil {
			t.Errorf("parseProcStat(%q) succeeded", bad)
		}
	}
}

func TestTreeTicks(t *testing.T) {
	procs := []procStat{
		{PID: 1, PPID: 0, UTime: 1000, STime: 1000},
		{PID: 10, PPID: 1, UTime: 5, STime: 7},    // a forked C parent
		{PID: 11, PPID: 10, UTime: 20, STime: 30}, // its tasks
		{PID: 12, PPID: 10, UTime: 1, STime: 2},
		{PID: 13, PPID: 12, UTime: 4, STime: 0}, // a grandchild
		{PID: 20, PPID: 1, UTime: 9, STime: 9},  // someone else
	}
	if got, ok := treeTicks(procs, 10); !ok || got != 5+7+20+30+1+2+4 {
		t.Errorf("treeTicks(10) = %d, %v; want 69", got, ok)
	}
	if got, ok := treeTicks(procs, 20); !ok || got != 18 {
		t.Errorf("treeTicks(20) = %d, %v; want 18", got, ok)
	}
	if _, ok := treeTicks(procs, 99); ok {
		t.Error("treeTicks of a missing process reported ok")
	}
}

func TestCPUPerMsg(t *testing.T) {
	// 150 ticks (1.5 s) over 30000 messages: 50 us each.
	if got := CPUPerMsg(150, 30000); math.Abs(got-50) > 1e-9 {
		t.Errorf("CPUPerMsg = %v, want 50", got)
	}
	if !math.IsNaN(CPUPerMsg(10, 0)) {
		t.Error("CPUPerMsg without messages is not NaN")
	}
}

func TestParseSwitches(t *testing.T) {
	status := []byte("Name:\trdscat\nThreads:\t5\nvoluntary_ctxt_switches:\t120\nnonvoluntary_ctxt_switches:\t7\n")
	vol, invol := int64(3), int64(1)
	if err := parseSwitches(status, &vol, &invol); err != nil || vol != 123 || invol != 8 {
		t.Errorf("parseSwitches = %d, %d, %v; want 123, 8, nil", vol, invol, err)
	}
	if err := parseSwitches([]byte("voluntary_ctxt_switches:\tmany\n"), &vol, &invol); err == nil {
		t.Error("parseSwitches took a count that is not a number")
	}
}
