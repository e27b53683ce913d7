package bench

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"time"
)

// ClockTick is the unit of the utime and stime fields of /proc/PID/stat:
// USER_HZ, which Linux fixes at 100 for user space on every architecture
// this library supports.
const ClockTick = 10 * time.Millisecond

// procStat is what the CPU accounting needs from one /proc/PID/stat line.
type procStat struct {
	PID, PPID    int
	UTime, STime int64 // clock ticks, all threads of the process
}

// parseProcStat parses a /proc/PID/stat line. The command name (field 2)
// is in parentheses and may itself contain spaces and parentheses, so the
// fields after it are found from the last closing parenthesis.
func parseProcStat(line []byte) (procStat, error) {
	var ps procStat
	open := bytes.IndexByte(line, '(')
	end := bytes.LastIndexByte(line, ')')
	if open < 1 || end < open {
		return ps, fmt.Errorf("stat line %.40q: no command name", line)
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(line[:open])))
	if err != nil {
		return ps, fmt.Errorf("stat line %.40q: pid: %w", line, err)
	}
	// After the name: state(3) ppid(4) pgrp session tty_nr tpgid flags
	// minflt cminflt majflt cmajflt utime(14) stime(15) ...
	f := bytes.Fields(line[end+1:])
	if len(f) < 13 {
		return ps, fmt.Errorf("stat line %.40q: %d fields after the name, want at least 13", line, len(f))
	}
	num := func(i int) (int64, error) { return strconv.ParseInt(string(f[i]), 10, 64) }
	ppid, err := num(1)
	if err != nil {
		return ps, fmt.Errorf("stat of %d: ppid: %w", pid, err)
	}
	ut, err := num(11)
	if err != nil {
		return ps, fmt.Errorf("stat of %d: utime: %w", pid, err)
	}
	st, err := num(12)
	if err != nil {
		return ps, fmt.Errorf("stat of %d: stime: %w", pid, err)
	}
	return procStat{PID: pid, PPID: int(ppid), UTime: ut, STime: st}, nil
}

// treeTicks sums utime+stime over root and all its descendants in procs
// (the C stress baseline forks one process per task; a Go program is one
// process whose stat already covers all its threads). It reports false if
// root is not among procs.
func treeTicks(procs []procStat, root int) (int64, bool) {
	byPID := map[int]procStat{}
	for _, p := range procs {
		byPID[p.PID] = p
	}
	pids, ok := treePIDs(procs, root)
	var sum int64
	for _, pid := range pids {
		sum += byPID[pid].UTime + byPID[pid].STime
	}
	return sum, ok
}

// treePIDs returns root and all its descendants in procs, root first, or
// false if root is not among them.
func treePIDs(procs []procStat, root int) ([]int, bool) {
	children := map[int][]int{}
	known := map[int]bool{}
	for _, p := range procs {
		known[p.PID] = true
		children[p.PPID] = append(children[p.PPID], p.PID)
	}
	if !known[root] {
		return nil, false
	}
	var out []int
	seen := map[int]bool{}
	queue := []int{root}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		if seen[pid] {
			continue
		}
		seen[pid] = true
		out = append(out, pid)
		queue = append(queue, children[pid]...)
	}
	return out, true
}

// parseSwitches adds the voluntary and involuntary context switches of
// one /proc/PID/task/TID/status file to *vol and *invol.
func parseSwitches(status []byte, vol, invol *int64) error {
	for _, line := range bytes.Split(status, []byte("\n")) {
		name, val, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		var dst *int64
		switch string(name) {
		case "voluntary_ctxt_switches":
			dst = vol
		case "nonvoluntary_ctxt_switches":
			dst = invol
		default:
			continue
		}
		n, err := strconv.ParseInt(string(bytes.TrimSpace(val)), 10, 64)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		*dst += n
	}
	return nil
}

// CPUPerMsg returns the CPU time per message in microseconds for a number
// of clock ticks spent over msgs messages, or NaN without messages.
func CPUPerMsg(ticks int64, msgs float64) float64 {
	if msgs <= 0 {
		return math.NaN()
	}
	return float64(ticks) * float64(ClockTick/time.Microsecond) / msgs
}
