package bench

import (
	"fmt"
	"strings"
	"time"
)

// Kind is the shape of a workload.
type Kind int

// Workload kinds.
const (
	// Throughput: a sender floods a receiver; the receiver's message rate
	// is measured.
	Throughput Kind = iota
	// Latency: request/response round trips of one message each way.
	Latency
	// RDMA: RDMA WRITEs with completion notices, Depth outstanding.
	RDMA
)

// Path is where the two ends of a workload sit in the rdsvm topology.
type Path string

// Paths.
const (
	PathLoop Path = "loop" // 127.0.0.1 to 127.0.0.1: the loopback transport
	PathTCP  Path = "tcp"  // RDS/TCP from the initial namespace to the peer namespace over a veth pair
	PathIB   Path = "ib"   // RDS/IB over Soft-RoCE between the two addresses of one rxe device
)

// Workload is one benchmark, run with the C baseline and with the Go
// workers alternately.
type Workload struct {
	Name  string
	Kind  Kind
	Path  Path
	Size  int // bytes per message or RDMA operation
	Batch int // receiver recvmmsg batch, and the Go sender's WriteBatch (0 or 1: none)
	Depth int // RDMA operations outstanding
	// Spin is how long a request/response receive busy-polls before it
	// waits: rdssock.Config.BusyPoll in Go, MSG_DONTWAIT retries with
	// sched_yield in C. Zero: Go waits in the poller, C blocks in recvmsg.
	Spin time.Duration
}

// Goal is a target on the Go/C ratio of a metric's medians.
type Goal struct {
	AtLeast bool    // true: Go/C >= Ratio; false: Go/C <= Ratio
	Ratio   float64 // 0: no target
}

func (g Goal) String() string {
	if g.Ratio == 0 {
		return "-"
	}
	if g.AtLeast {
		return fmt.Sprintf(">= %.2f", g.Ratio)
	}
	return fmt.Sprintf("<= %.2f", g.Ratio)
}

// Met reports whether ratio satisfies the goal.
func (g Goal) Met(ratio float64) bool {
	if g.AtLeast {
		return ratio >= g.Ratio
	}
	return ratio <= g.Ratio
}

// Targets from the performance issue.
var (
	GoalThroughput      = Goal{AtLeast: true, Ratio: 0.95}
	GoalBatchThroughput = Goal{AtLeast: true, Ratio: 1.0}
	GoalLatencyP50      = Goal{AtLeast: false, Ratio: 1.10}
	GoalRDMA            = Goal{AtLeast: true, Ratio: 0.95}
	// GoalCPU bounds the CPU time per message of each process (user and
	// system, from /proc/PID/stat over the window).
	GoalCPU = Goal{AtLeast: false, Ratio: 1.10}
)

// CPULabel is the unit of the CPU-per-message row of one side.
func CPULabel(side string) string { return "CPU us/msg " + side }

// Busy-poll budgets of the "spin" request/response workloads, on both
// sides: longer than a round trip of the emulated VM (about 80 us over
// loopback, 400 us over RDS/TCP), so that an answer usually comes within
// the spin.
const (
	BusySpinLoop = 200 * time.Microsecond
	BusySpinTCP  = time.Millisecond
)

// BatchSize is the batch the batch workloads use.
const BatchSize = 32

// RDMASize is the per-operation size of the RDMA workloads: modest, since
// Soft-RoCE was seen to fail with 32 KiB and more per operation.
const RDMASize = 16 << 10

// DefaultWorkloads returns every workload of the issue: one-way throughput
// with 64 B, 4 KiB and 64 KiB over loopback and RDS/TCP, without and with
// batching; 64 B request/response latency over both; RDMA WRITE with notify
// one at a time and 16 deep over Soft-RoCE.
func DefaultWorkloads() []Workload {
	var ws []Workload
	for _, batch := range []int{1, BatchSize} {
		for _, p := range []Path{PathLoop, PathTCP} {
			for _, size := range []int{64, 4 << 10, 64 << 10} {
				name := fmt.Sprintf("tput %s %s", p, sizeName(size))
				if batch > 1 {
					name += fmt.Sprintf(" batch%d", batch)
				}
				ws = append(ws, Workload{Name: name, Kind: Throughput, Path: p, Size: size, Batch: batch})
			}
		}
	}
	for _, p := range []Path{PathLoop, PathTCP} {
		ws = append(ws, Workload{Name: fmt.Sprintf("rr %s 64B", p), Kind: Latency, Path: p, Size: 64})
		spin := BusySpinLoop
		if p != PathLoop {
			spin = BusySpinTCP
		}
		ws = append(ws, Workload{Name: fmt.Sprintf("rr %s 64B spin", p), Kind: Latency, Path: p, Size: 64, Spin: spin})
	}
	for _, d := range []int{1, 16} {
		ws = append(ws, Workload{Name: fmt.Sprintf("rdma write %s qd%d", sizeName(RDMASize), d), Kind: RDMA, Path: PathIB, Size: RDMASize, Depth: d})
	}
	return ws
}

func sizeName(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

// Metric is one measured quantity of a workload with its target.
type Metric struct {
	Key   string // the RESULT key: "rate", "p50_ns", "p99_ns"
	Label string // shown in the table: "msg/s", "p50 us", ...
	Scale float64
	Goal  Goal
}

// Metrics returns what is reported for w.
func (w Workload) Metrics() []Metric {
	switch w.Kind {
	case Latency:
		return []Metric{
			{Key: "p50_ns", Label: "p50 us", Scale: 1e-3, Goal: GoalLatencyP50},
			{Key: "p99_ns", Label: "p99 us", Scale: 1e-3},
			// Context switches of the whole VM per round trip: equal
			// counts mean a latency gap is CPU time, not extra sleeps.
			{Key: "ctxt_per_msg", Label: "switches/RT", Scale: 1},
		}
	case RDMA:
		return []Metric{{Key: "rate", Label: "ops/s", Scale: 1, Goal: GoalRDMA}}
	}
	g := GoalThroughput
	if w.Batch > 1 {
		g = GoalBatchThroughput
	}
	return []Metric{{Key: "rate", Label: "msg/s", Scale: 1, Goal: g}}
}

// Sides names the measuring side of w and its peer: receiver and sender,
// client and echo, initiator and target.
func (w Workload) Sides() (main, peer string) {
	switch w.Kind {
	case Latency:
		return "client", "echo"
	case RDMA:
		return "initiator", "target"
	}
	return "receiver", "sender"
}

// Select returns the workloads whose name contains any of the
// comma-separated words of filter (all for an empty filter).
func Select(ws []Workload, filter string) []Workload {
	if strings.TrimSpace(filter) == "" {
		return ws
	}
	var out []Workload
	for _, w := range ws {
		for _, f := range strings.Split(filter, ",") {
			if f = strings.TrimSpace(f); f != "" && strings.Contains(w.Name, f) {
				out = append(out, w)
				break
			}
		}
	}
	return out
}
