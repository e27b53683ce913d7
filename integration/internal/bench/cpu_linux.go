//go:build linux

package bench

import (
	"fmt"
	"os"
	"strconv"
)

// readProcStats reads /proc/PID/stat of every process. Processes that exit
// while it reads are skipped.
func readProcStats() ([]procStat, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	out := make([]procStat, 0, len(ents))
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone
		}
		ps, err := parseProcStat(b)
		if err != nil {
			return nil, err
		}
		out = append(out, ps)
	}
	return out, nil
}

// cpuTicks returns utime+stime in clock ticks of each process tree rooted
// at pids, read from /proc at one moment.
func cpuTicks(pids ...int) ([]int64, error) {
	procs, err := readProcStats()
	if err != nil {
		return nil, err
	}
	out := make([]int64, len(pids))
	for i, pid := range pids {
		t, ok := treeTicks(procs, pid)
		if !ok {
			return nil, fmt.Errorf("process %d is gone", pid)
		}
		out[i] = t
	}
	return out, nil
}
