package bench

import (
	"io"
	"time"
)

// Config configures Run.
type Config struct {
	// CBinary is the C baseline, run as CBinary ROLE key=value...
	CBinary string
	// GoBinary and GoArgs run a Go worker: GoBinary GoArgs... ROLE
	// key=value... (for example the rdsbench command with GoArgs
	// ["worker"]), ending in Worker.
	GoBinary string
	GoArgs   []string

	Workloads []Workload
	Rounds    int // rounds per workload, C and Go alternating (default 5)
	// ExtraRounds more rounds run for a workload whose first metric
	// spread more than NoisySpread on either side over the first Rounds
	// (defaults 4 and 0.3; a negative ExtraRounds turns this off). The
	// choice depends only on the spread, never on the ratio.
	ExtraRounds int
	NoisySpread float64
	Warm        time.Duration // warm-up before each window (default 0.5s)
	Window      time.Duration // measurement window (default 2s)
	// Diagnose lists workloads to run again with mixed pairings (C on one
	// side, Go on the other) and with the raw=1 Go variant.
	Diagnose   []Workload
	DiagRounds int // rounds of each diagnosis (default 3)

	// Tools are the rows of "The tools as users run them": StressC (the C
	// stress baseline, cbaseline/rdsstress.c) against Rdscat (the cmd/rdscat
	// binary), run after Workloads.
	Tools   []ToolWorkload
	StressC string
	Rdscat  string
	// Example is the examples/rdmawrite binary, which the Example tool
	// workloads run in rdscat's place.
	Example string
	// ProfileDir, when set, makes every rdscat process of the tools rounds
	// write a CPU profile there (rdscat stress -cpuprofile), named after
	// the workload, its port and the side. The profiler costs CPU, so
	// such a run's numbers are for profile-guided builds, not a report.
	ProfileDir string
	// Perf, when set, is a directory holding perf, the shared libraries
	// it needs and their loader as ld.so (see PerfRecord): every process
	// of the tools rounds, C and Go, then runs under perf record, writing
	// its samples into PerfDir. Like ProfileDir, for diagnosis only.
	Perf, PerfDir string
	// PerfStat, with Perf, runs those processes under perf stat instead
	// (see PerfStat): each round's line then gives, for each process, its
	// system calls of the kinds that matter here and its context switches
	// per message, counted over its whole run.
	PerfStat bool
	// PerfSwitches, with Perf, records those processes' context switches
	// instead (see PerfSwitches), to tell who preempts them.
	PerfSwitches bool

	// ABRdscat, when set, is another build of rdscat that the tools rounds
	// run in the C baseline's place: the tools table then compares two
	// builds in the same run, ABRdscat (A) in the C column and Rdscat (B)
	// in the rdscat column. EnvA and EnvB (NAME=VALUE) are added to the
	// environment of A's and B's processes; with ABRdscat empty, EnvA
	// alone selects A/B mode with Rdscat on both sides. For comparing
	// changes, never for the report.
	ABRdscat   string
	EnvA, EnvB []string

	// LongRun is the window of the resident-memory run (0: skip it).
	LongRun time.Duration

	// WakeRounds is how many rounds "What the VM charges for code" runs
	// (0: skip it), with WakeC (cbaseline/wakecode.c) as its C side and
	// the Go worker role "wakecode" as its Go side.
	WakeRounds int
	WakeC      string

	Log     io.Writer // progress lines; nil: none
	Verbose bool      // log every worker's output lines too

	// AllocSites makes the Go workers print the call sites of the heap
	// allocations in their windows (with Verbose, they are logged).
	AllocSites bool
}

// abMode reports whether the tools rounds compare two builds of rdscat
// (see Config.ABRdscat).
func (c *Config) abMode() bool { return c.ABRdscat != "" || len(c.EnvA) > 0 }
