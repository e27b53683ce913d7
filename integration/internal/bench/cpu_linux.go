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

// schedUse returns, for each process tree rooted at pids, read from /proc
// at one moment: its user time in clock ticks and the voluntary and
// involuntary context switches of all its threads. Threads that exit while
// it reads are skipped (and their switches lost: a Go program's threads
// live as long as it does, a C task is one thread).
func schedUse(pids ...int) ([]SchedUse, error) {
	procs, err := readProcStats()
	if err != nil {
		return nil, err
	}
	byPID := map[int]procStat{}
	for _, p := range procs {
		byPID[p.PID] = p
	}
	out := make([]SchedUse, len(pids))
	for i, root := range pids {
		tree, ok := treePIDs(procs, root)
		if !ok {
			return nil, fmt.Errorf("process %d is gone", root)
		}
		for _, pid := range tree {
			out[i].UserTicks += byPID[pid].UTime
			dir := "/proc/" + strconv.Itoa(pid) + "/task"
			tasks, err := os.ReadDir(dir)
			if err != nil {
				continue // gone
			}
			for _, t := range tasks {
				b, err := os.ReadFile(dir + "/" + t.Name() + "/status")
				if err != nil {
					continue // gone
				}
				if err := parseSwitches(b, &out[i].Voluntary, &out[i].Involuntary); err != nil {
					return nil, fmt.Errorf("%s/%s/status: %w", dir, t.Name(), err)
				}
			}
		}
	}
	return out, nil
}
