package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ToolMode is what a tool workload does.
type ToolMode string

// Tool workload modes: the `rdscat stress` modes, which the C stress
// baseline (cbaseline/rdsstress.c) has too.
const (
	ToolRR     ToolMode = "rr"     // requests answered by acks of the same size, Depth in flight per task
	ToolOneway ToolMode = "oneway" // messages with no answer
	ToolWrite  ToolMode = "write"  // RDMA WRITEs with immediate data and a completion notice each (RDS/IB)
	ToolRead   ToolMode = "read"   // RDMA READs, likewise
)

// ToolWorkload is one row of "The tools as users run them": the rdscat
// binary against the C stress baseline, two processes each.
type ToolWorkload struct {
	Name  string
	Mode  ToolMode
	Path  Path // PathTCP (receiver in the peer namespace) or PathIB (two addresses on the rxe link)
	Tasks int  // sender sockets (rdscat -tasks; C tasks=, one process per task on each side)
	Depth int  // requests or RDMA operations in flight per task
	Size  int  // request (and ack), message or RDMA operation bytes
	// Example runs examples/rdmawrite in rdscat's place (the section
	// "The documented RDMA path"): RDMA modes only, one task.
	Example bool
}

// ToolWorkloads returns the rows of issue 13: rr with 1 task x depth 1,
// 1x4 and 4x8 at 64 B and 1 KiB over RDS/TCP, rr 1x4 over RDS/IB, oneway
// 64 B and 4 KiB over RDS/TCP, and RDMA WRITE and READ of 4 KiB and 16 KiB
// at depth 1, 4 and 16 over Soft-RoCE.
func ToolWorkloads() []ToolWorkload {
	var ws []ToolWorkload
	for _, size := range []int{64, 1 << 10} {
		for _, td := range [][2]int{{1, 1}, {1, 4}, {4, 8}} {
			ws = append(ws, ToolWorkload{Name: fmt.Sprintf("rr tcp %dx%d %s", td[0], td[1], sizeName(size)), Mode: ToolRR, Path: PathTCP, Tasks: td[0], Depth: td[1], Size: size})
		}
	}
	ws = append(ws, ToolWorkload{Name: "rr ib 1x4 1KiB", Mode: ToolRR, Path: PathIB, Tasks: 1, Depth: 4, Size: 1 << 10})
	for _, size := range []int{64, 4 << 10} {
		ws = append(ws, ToolWorkload{Name: "oneway tcp " + sizeName(size), Mode: ToolOneway, Path: PathTCP, Tasks: 1, Depth: 1, Size: size})
	}
	for _, mode := range []ToolMode{ToolWrite, ToolRead} {
		for _, size := range []int{4 << 10, 16 << 10} {
			for _, d := range []int{1, 4, 16} {
				ws = append(ws, ToolWorkload{Name: fmt.Sprintf("rdma %s ib %s qd%d", mode, sizeName(size), d), Mode: mode, Path: PathIB, Tasks: 1, Depth: d, Size: size})
			}
		}
	}
	return ws
}

// ExampleWorkloads returns the rows of "The documented RDMA path" (issue
// 13): examples/rdmawrite, the rdmaops package example as a program,
// issuing RDMA WRITEs and READs of 4 KiB with immediate data and a
// completion notice each, at depth 1 and 16, against the same C baseline
// as the tools rows.
func ExampleWorkloads() []ToolWorkload {
	var ws []ToolWorkload
	for _, mode := range []ToolMode{ToolWrite, ToolRead} {
		for _, d := range []int{1, 16} {
			ws = append(ws, ToolWorkload{Name: fmt.Sprintf("example %s ib %s qd%d", mode, sizeName(4<<10), d), Mode: mode, Path: PathIB, Tasks: 1, Depth: d, Size: 4 << 10, Example: true})
		}
	}
	return ws
}

// ToolPrefix starts the name a -run filter matches a tool workload by:
// "tools" selects them all, "tools rr" the request/response ones.
const ToolPrefix = "tools "

// SelectTools returns the tool workloads whose name, with ToolPrefix in
// front, contains any of the comma-separated words of filter (all for an
// empty filter), as Select does for the library workloads.
func SelectTools(ws []ToolWorkload, filter string) []ToolWorkload {
	if strings.TrimSpace(filter) == "" {
		return ws
	}
	var out []ToolWorkload
	for _, w := range ws {
		for _, f := range strings.Split(filter, ",") {
			if f = strings.TrimSpace(f); f != "" && strings.Contains(ToolPrefix+w.Name, f) {
				out = append(out, w)
				break
			}
		}
	}
	return out
}

// RDMA reports whether w issues RDMA operations.
func (w ToolWorkload) RDMA() bool { return w.Mode == ToolWrite || w.Mode == ToolRead }

// Unit is the label of w's rate: requests (each answered), messages or
// RDMA operations per second.
func (w ToolWorkload) Unit() string {
	switch {
	case w.Mode == ToolRR:
		return "req/s"
	case w.RDMA():
		return "ops/s"
	}
	return "msg/s"
}

// Counter names the kernel's RDS counter (RDS_INFO_COUNTERS, global over
// namespaces) the driver counts w's work with, and how many counts make
// one unit: every request and every ack is a delivered message; an RDMA
// operation is counted once when sendmsg accepts its RDS_CMSG_RDMA_ARGS.
// The tools' own protocol messages (rdscat's RDMA hello and buffer
// announcements; with -verify, which the rows do not use, a credit per
// operation) do not change it.
func (w ToolWorkload) Counter() (name string, per float64) {
	switch {
	case w.Mode == ToolRR:
		return "recv_delivered", 2
	case w.RDMA():
		return "send_rdma", 1
	}
	return "recv_delivered", 1
}

// ToolSetupSlack is how much longer than the warm-up and the window the
// tools are told to send: it covers a sender's start (process, sockets,
// rdscat's warm-up ping, the RDMA buffer registrations) before its first
// message. A round whose window would end after the sender's run fails.
const ToolSetupSlack = 2 * time.Second

// toolRun is where and how long one run of a tool workload goes.
type toolRun struct {
	Receiver netip.AddrPort // passive side's address; C task i uses port+i
	Sender   netip.Addr     // active side's source address
	NetNS    string         // the receiver's namespace name (RDS/TCP), or ""
	Duration time.Duration  // the sender's whole run
	Ready    string         // rdscat: the file its receiver writes once bound
}

// CArgs returns the arguments of the C stress baseline's passive and active
// sides. The active side's own window is its whole run (warm=0, dur=the
// run), so that both tools send for as long; the driver measures its own
// window inside that run.
func (w ToolWorkload) CArgs(r toolRun) (passive, active []string) {
	tasks := "tasks=" + strconv.Itoa(w.Tasks)
	passive = []string{"passive", "bind=" + r.Receiver.String(), tasks}
	if !w.RDMA() {
		// The receivers size their socket buffers from it, both the same way.
		passive = append(passive, "size="+strconv.Itoa(w.Size))
	}
	if r.NetNS != "" {
		passive = append(passive, "netns=/run/netns/"+r.NetNS)
	}
	active = []string{"active", "bind=" + r.Sender.String(), "peer=" + r.Receiver.String(), tasks, "depth=" + strconv.Itoa(w.Depth),
		"warm=0", "dur=" + strconv.FormatFloat(r.Duration.Seconds(), 'f', -1, 64)}
	switch w.Mode {
	case ToolRR:
		active = append(active, "mode=rr", "size="+strconv.Itoa(w.Size), "ack-size="+strconv.Itoa(w.Size))
	case ToolOneway:
		active = append(active, "mode=oneway", "size="+strconv.Itoa(w.Size))
	default:
		active = append(active, "rdma="+string(w.Mode), "rdma-size="+strconv.Itoa(w.Size))
	}
	return passive, active
}

// RdscatArgs returns the arguments of `rdscat stress` as receiver and as
// sender, with flags a user would give (and -json, -q, -ready for the
// driver).
func (w ToolWorkload) RdscatArgs(r toolRun) (receiver, sender []string) {
	receiver = []string{"stress", "-listen", r.Receiver.String(), "-once", "-json", "-q", "-ready", r.Ready}
	if r.NetNS != "" {
		receiver = append(receiver, "-netns", r.NetNS)
	}
	if !w.RDMA() {
		receiver = append(receiver, "-size", strconv.Itoa(w.Size))
	}
	sender = []string{"stress", "-to", r.Receiver.String(), "-from", r.Sender.String(), "-tasks", strconv.Itoa(w.Tasks), "-depth", strconv.Itoa(w.Depth),
		"-duration", r.Duration.String(), "-json", "-q"}
	if w.Tasks > 1 {
		// A receiving socket and goroutine per task, as the C tool
		// has a passive process per task.
		receiver = append(receiver, "-ports", strconv.Itoa(w.Tasks))
		sender = append(sender, "-ports", strconv.Itoa(w.Tasks))
	}
	switch w.Mode {
	case ToolRR:
		sender = append(sender, "-mode", "rr", "-size", strconv.Itoa(w.Size), "-ack-size", strconv.Itoa(w.Size))
	case ToolOneway:
		sender = append(sender, "-mode", "oneway", "-size", strconv.Itoa(w.Size))
	default:
		sender = append(sender, "-rdma", string(w.Mode), "-rdma-size", strconv.Itoa(w.Size))
	}
	return receiver, sender
}

// ExampleArgs returns the arguments of examples/rdmawrite's passive and
// active sides for the RDMA workload w: the active side binds the port
// after the receiver's (the passive side answers that address) and issues
// operations for the run's duration, both with -verify=false, so that the
// program does what the C baseline does: no data written or checked, and
// no acknowledgements.
func (w ToolWorkload) ExampleArgs(r toolRun) (passive, active []string) {
	from := netip.AddrPortFrom(r.Sender, r.Receiver.Port()+1)
	common := []string{"-op", string(w.Mode), "-depth", strconv.Itoa(w.Depth), "-size", strconv.Itoa(w.Size), "-verify=false",
		"-timeout", (r.Duration + time.Minute).String()}
	passive = append([]string{"-role", "passive", "-local", r.Receiver.String(), "-peer", from.String()}, common...)
	active = append([]string{"-role", "active", "-local", from.String(), "-peer", r.Receiver.String(), "-duration", r.Duration.String()}, common...)
	return passive, active
}

// ParseExampleResult reads the active side's RESULT line of
// examples/rdmawrite from its output: its own rate and the operations it
// issued (retries included), which the kernel's count must match.
func ParseExampleResult(out string) (rate float64, issued uint64, err error) {
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "RESULT" || f[1] != "role=active" {
			continue
		}
		// Its words (role=, op=) aside, the line is a RESULT of numbers.
		nums := slices.DeleteFunc(f, func(kv string) bool { return strings.HasPrefix(kv, "role=") || strings.HasPrefix(kv, "op=") })
		r, ok := ParseResult(strings.Join(nums, " "))
		rate, hasRate := r["rate"]
		n, hasIssued := r["issued"]
		if !ok || !hasRate || !hasIssued {
			return 0, 0, fmt.Errorf("example RESULT %q: want key=number fields, rate= and issued= among them", line)
		}
		return rate, uint64(n), nil
	}
	return 0, 0, errors.New("the example's active side printed no RESULT role=active line")
}

// StressSummary is what the driver reads of `rdscat stress -json`: enough
// to check the run and to log the tool's own rate next to the measured one.
type StressSummary struct {
	Sender *struct {
		Seconds         float64 `json:"seconds"`
		Sent            uint64  `json:"sent"`
		Acked           uint64  `json:"acked"`
		ReceiverCounted uint64  `json:"receiver_counted"`
		CountsMatch     bool    `json:"counts_match"`
		Errors          uint64  `json:"errors"`
		MsgsPerSec      float64 `json:"msgs_per_sec"`
	} `json:"sender"`
	Receiver *struct {
		Received   uint64  `json:"received"`
		MsgsPerSec float64 `json:"msgs_per_sec"`
	} `json:"receiver"`
}

// ParseStressSummary reads the JSON summary among an rdscat run's output
// lines (it is the last JSON object printed).
func ParseStressSummary(out string) (*StressSummary, error) {
	i := strings.LastIndex(out, "\n{")
	if i < 0 {
		if !strings.HasPrefix(out, "{") {
			return nil, errors.New("no JSON summary in the output")
		}
		i = -1
	}
	var s StressSummary
	if err := json.Unmarshal([]byte(out[i+1:]), &s); err != nil {
		return nil, fmt.Errorf("the JSON summary: %w", err)
	}
	if s.Sender == nil && s.Receiver == nil {
		return nil, errors.New("the JSON summary has neither a sender nor a receiver part")
	}
	return &s, nil
}

// ToolSample is one reading at an edge of the driver's window: the time,
// the RDS counter of the workload, and the CPU ticks (user and system) and
// the rest of the scheduling use of the sender's and the receiver's
// process trees.
type ToolSample struct {
	At       time.Time
	Count    uint64
	Sender   int64
	Receiver int64

	SenderUse, ReceiverUse SchedUse
}

// SchedUse is what a process tree has used of the scheduler so far: its
// user time (of the CPU ticks) and its context switches.
type SchedUse struct {
	UserTicks              int64
	Voluntary, Involuntary int64
}

// PerUnit is the use between readings a and u spread over units: user CPU
// time in microseconds and switches, per unit.
func (u SchedUse) PerUnit(a SchedUse, units float64) (userUs, voluntary, involuntary float64) {
	if units <= 0 {
		return 0, 0, 0
	}
	return CPUPerMsg(u.UserTicks-a.UserTicks, units), float64(u.Voluntary-a.Voluntary) / units, float64(u.Involuntary-a.Involuntary) / units
}

// ToolMeasure turns the readings at the two edges of a window into the
// rate (units per second) and the CPU time per unit of each side in
// microseconds.
func ToolMeasure(w ToolWorkload, a, b ToolSample) (rate, cpuSender, cpuReceiver float64, err error) {
	_, per := w.Counter()
	secs := b.At.Sub(a.At).Seconds()
	if secs <= 0 || b.Count < a.Count || b.Sender < a.Sender || b.Receiver < a.Receiver {
		return 0, 0, 0, fmt.Errorf("readings out of order: %+v then %+v", a, b)
	}
	units := float64(b.Count-a.Count) / per
	if units <= 0 {
		return 0, 0, 0, errors.New("no traffic in the window")
	}
	return units / secs, CPUPerMsg(b.Sender-a.Sender, units), CPUPerMsg(b.Receiver-a.Receiver, units), nil
}
