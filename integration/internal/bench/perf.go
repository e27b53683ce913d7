package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// PerfRecord returns the command that runs bin with args under perf record
// (software CPU-clock samples at 4 kHz, which work in a guest without a
// PMU), writing its samples to out. dir holds perf, its shared libraries
// and their loader as ld.so, so that perf runs where it is not installed
// (the test VM): the loader starts perf with dir as its library path.
func PerfRecord(dir, out, bin string, args []string) (string, []string) {
	return shippedPerf(dir, append([]string{"record", "-q", "-e", "cpu-clock", "-F", "4000", "-o", out, "--", bin}, args...))
}

// PerfSwitches is PerfRecord for the context switches of bin and its
// threads: the sched_switch tracepoint (which needs tracefs mounted)
// instead of CPU-clock samples. Report them with SwitchSort.
func PerfSwitches(dir, out, bin string, args []string) (string, []string) {
	return shippedPerf(dir, append([]string{"record", "-q", "-e", SwitchEvent, "-o", out, "--", bin}, args...))
}

// SwitchEvent is the tracepoint PerfSwitches records, and SwitchSort the
// PerfReport sort for it: the state of the thread that left the CPU (R
// or R+: preempted while it could run; S, D: it went to sleep) and the
// thread that got the CPU. A switch counts for the process when one of
// its threads left or got the CPU, so a thread of the process on the
// right is one being switched in; rows of R and another thread are the
// process's threads preempted by that thread.
const (
	SwitchEvent = "sched:sched_switch"
	SwitchSort  = "prev_state,next_comm"
)

// shippedPerf returns the command that runs perf with args from dir, which
// holds perf, its shared libraries and their loader as ld.so: the loader
// starts perf with dir as its library path.
func shippedPerf(dir string, args []string) (string, []string) {
	return filepath.Join(dir, "ld.so"), append([]string{"--library-path", dir, filepath.Join(dir, "perf")}, args...)
}

// PerfReport returns the command that prints the report of the samples in
// data, self time only, sorted by sort ("dso": the share of the kernel,
// the program and each library; "dso,sym": of each function), down to
// 0.3%.
func PerfReport(dir, data, sort string) (string, []string) {
	return shippedPerf(dir, []string{"report", "-i", data, "--stdio", "--no-children", "--sort", sort, "--percent-limit", "0.3"})
}

// statSyscalls are the system calls PerfStat counts by kind: those of the
// data path (C: ppoll, recvmsg, sendmsg; Go: also recvmmsg) and those that
// only the Go runtime and rdssock's waits make (threads parking on futexes,
// sysmon's sleeps, preemption signals, the runtime poller, the thread ID a
// read in recvmsg publishes).
var statSyscalls = []string{
	"recvmsg", "recvmmsg", "sendmsg", "ppoll", "poll", "futex", "epoll_pwait", "epoll_ctl",
	"nanosleep", "tgkill", "gettid", "fcntl", "sched_yield",
}

// PerfStat returns the command that runs bin with args under perf stat,
// writing to out the counts of its system calls (all, and each kind of
// statSyscalls), context switches and CPU migrations, over all its threads
// and children. Those are software events and tracepoints, which work in
// a guest without a PMU; the tracepoints need tracefs mounted.
func PerfStat(dir, out, bin string, args []string) (string, []string) {
	return shippedPerf(dir, append([]string{"stat", "-x", ",", "-e", StatEvents(), "-o", out, "--", bin}, args...))
}

// StatEvents are the events PerfStat counts, comma-separated.
func StatEvents() string {
	ev := []string{"raw_syscalls:sys_enter", "context-switches", "cpu-migrations"}
	for _, s := range statSyscalls {
		ev = append(ev, "syscalls:sys_enter_"+s)
	}
	return strings.Join(ev, ",")
}

// HoldTracepoints keeps PerfStat's tracepoints enabled until stop: a perf
// stat over the whole machine that counts into nothing. Enabling and
// disabling a tracepoint patches kernel text, which for every PerfStat
// process of a run (twice per tool run) once left a test VM's CPU spinning
// in syscall_trace_enter for minutes (a soft lockup, Linux 6.1 under
// TCG); held, the tools' own perf processes only add references.
// events is StatEvents() for PerfStat's, SwitchEvent for PerfSwitches'.
func HoldTracepoints(dir, events string) (stop func(), err error) {
	bin, args := shippedPerf(dir, []string{"stat", "-a", "-x", ",", "-e", events, "-o", "/dev/null"}) // no command: counts until killed
	cmd := exec.Command(bin, args...)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("perf stat holding the tracepoints: %w", err)
	}
	time.Sleep(time.Second) // until perf has opened its events
	return func() {
		cmd.Process.Kill()
		cmd.Wait()
	}, nil
}

// ParsePerfStat reads the CSV output of PerfStat's perf stat (-x ,):
// each event's count, named "syscalls" for all system calls, the bare
// name for one kind, and the software events' names.
func ParsePerfStat(b []byte) (map[string]uint64, error) {
	counts := map[string]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, ",")
		if len(f) < 3 {
			continue
		}
		if strings.HasPrefix(f[0], "<") {
			continue // <not counted>, <not supported>
		}
		n, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("perf stat line %q: no count (%v)", line, err)
		}
		name := f[2]
		switch {
		case name == "raw_syscalls:sys_enter":
			name = "syscalls"
		case strings.HasPrefix(name, "syscalls:sys_enter_"):
			name = strings.TrimPrefix(name, "syscalls:sys_enter_")
		}
		counts[name] = n
	}
	if len(counts) == 0 {
		return nil, fmt.Errorf("perf stat wrote no counts: %q", b)
	}
	return counts, sc.Err()
}

// PerMessage formats counts per message, n messages: all system calls and
// context switches first, then every kind that occurred at least once per
// 100 messages, in statSyscalls' order.
func PerMessage(counts map[string]uint64, n uint64) string {
	if n == 0 {
		return "no messages"
	}
	per := func(k string) float64 { return float64(counts[k]) / float64(n) }
	parts := []string{fmt.Sprintf("syscalls %.2f", per("syscalls")), fmt.Sprintf("switches %.2f", per("context-switches"))}
	for _, s := range statSyscalls {
		if v := per(s); v >= 0.01 {
			parts = append(parts, fmt.Sprintf("%s %.2f", s, v))
		}
	}
	return strings.Join(parts, " ")
}
