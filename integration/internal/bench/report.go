package bench

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Row is one metric of one workload over all rounds.
type Row struct {
	Workload string
	Metric   string    // label, such as "msg/s" or "p50 us"
	Goal     Goal      // target on Go/C
	C, Go    []float64 // one value per successful round, scaled to the label's unit
	Err      string    // why rounds are missing, if any

	// Pairs are Go/C of each round in which both sides succeeded (tools
	// rows): the two measurements of a round run back to back, so a
	// pair's ratio leaves out the slow drift of the host's load that
	// makes the medians' spreads.
	Pairs []float64 `json:",omitempty"`
}

// Better reports whether ratio (Go/C) is on Go's good side of 1: above it
// for a rate, below it for a cost.
func (g Goal) Better(ratio float64) bool {
	if g.AtLeast {
		return ratio > 1
	}
	return ratio < 1
}

// Ratio returns median(Go)/median(C), or NaN without data.
func (r Row) Ratio() float64 {
	c, g := Median(r.C), Median(r.Go)
	if len(r.C) == 0 || len(r.Go) == 0 || c == 0 {
		return math.NaN()
	}
	return g / c
}

// Verdict returns "met", "missed", "-" (no target) or "failed" (no data).
func (r Row) Verdict() string {
	ratio := r.Ratio()
	switch {
	case math.IsNaN(ratio):
		return "failed"
	case r.Goal.Ratio == 0:
		return "-"
	case r.Goal.Met(ratio):
		return "met"
	}
	return "missed"
}

// Alloc is the Go heap allocations counted in the measurement windows of
// one side of a workload, summed over rounds.
type Alloc struct {
	Workload string
	Side     string // "receiver", "sender", "client", "initiator"
	What     string // the calls on the hot path
	Allocs   uint64
	Msgs     uint64
}

// PerMsg returns allocations per message.
func (a Alloc) PerMsg() float64 {
	if a.Msgs == 0 {
		return math.NaN()
	}
	return float64(a.Allocs) / float64(a.Msgs)
}

// Met reports whether the side made no allocation per message in steady
// state: fewer than one allocation per hundred messages. The count is the
// whole process's, so allocations that do not scale with messages show up
// as a handful per window (a sync.Pool refilling the per-P cache of a P the
// goroutine moved to, the runtime's scavenger timer), while anything on the
// message path gives one or more per message.
func (a Alloc) Met() bool { return a.Msgs > 0 && a.Allocs*100 < a.Msgs }

// RSS is a receiver's resident memory over the long run.
type RSS struct {
	Impl       string // "C" or "Go"
	Workload   string
	Seconds    float64
	Msgs       uint64
	Allocs     uint64 // Go only
	StartKiB   int64
	EndKiB     int64
	MaxKiB     int64
	AnonStart  int64 // anonymous memory (heap, stacks) at the start, KiB
	AnonEnd    int64
	At10s      int64 // RSS ten seconds into the window, KiB
	Anon10s    int64
	Threads    [2]int64 // OS threads at the start and end (Go only)
	ControlMsg uint64   // control messages parsed
}

// Flat reports whether the resident set grew by at most 5% from the start
// to the end of the window, and by at most 1% over its last 50 seconds
// (from ten seconds in to the end): a one-time step early in the run is
// tolerated, a steady climb is not.
func (r RSS) Flat() bool {
	if r.StartKiB <= 0 || r.EndKiB <= 0 || float64(r.EndKiB-r.StartKiB) > 0.05*float64(r.StartKiB) {
		return false
	}
	return r.At10s <= 0 || float64(r.EndKiB-r.At10s) <= 0.01*float64(r.At10s)
}

// Diagnosis is one workload run with several pairings of C and Go sides.
type Diagnosis struct {
	Workload string
	Metric   string
	Pairings []string    // the first is C on both sides
	Values   [][]float64 // per pairing, one value per round
}

// WakeCost is one configuration of the wake-up code measurement: the
// measuring process's user CPU time per message, one value per round, in
// Lang (C or Go) with K calls of Mode (repeated or distinct) per message.
type WakeCost struct {
	Lang   string
	Mode   string
	K      int
	UserUS []float64
}

// WakeK is how many calls the wake-up code measurement makes per message,
// and WakeMsgs over how many messages it measures.
const (
	WakeK    = 400
	WakeMsgs = 10000
)

// Report is the result of a benchmark run.
type Report struct {
	Kernel  string
	Started time.Time
	Elapsed time.Duration
	Rounds  int
	// ExtraRounds were added to a workload whose spread exceeded
	// NoisySpread (0: never).
	ExtraRounds int
	NoisySpread float64
	Warm        time.Duration
	Window      time.Duration
	LongWarm    time.Duration // traffic before the long run's window
	Rows        []Row
	// ToolRows are the rows of "The tools as users run them"; ToolSlack
	// is how much longer than warm-up and window the tools were told to
	// run.
	ToolRows  []Row
	ToolSlack time.Duration
	// ExampleRows are the rows of "The documented RDMA path": the tool
	// workloads with examples/rdmawrite in rdscat's place.
	ExampleRows []Row
	Allocs      []Alloc
	RSS         []RSS
	Diagnoses   []Diagnosis
	// WakeCode is "What the VM charges for code" (see Config.WakeRounds).
	WakeCode []WakeCost
	Failures []string
	Settle   Settle // waits for RDS/TCP to drain before the TCP runs
}

// Settle sums up the waits before RDS/TCP runs until the previous run's
// data had left the TCP sockets.
type Settle struct {
	Runs       int           // runs that checked
	Waited     int           // runs that found data and waited
	MaxWait    time.Duration // longest wait
	MaxBacklog int64         // most bytes found
}

func (s Settle) String() string {
	return fmt.Sprintf("before each of the %d RDS/TCP runs the driver waited until the RDS/TCP sockets of both namespaces held no data; %d runs found data left by the previous run (at most %d bytes), the longest wait was %v",
		s.Runs, s.Waited, s.MaxBacklog, s.MaxWait.Round(time.Millisecond))
}

func (s *Settle) add(waited time.Duration, backlog int64) {
	s.Runs++
	if backlog > 0 {
		s.Waited++
	}
	s.MaxWait = max(s.MaxWait, waited)
	s.MaxBacklog = max(s.MaxBacklog, backlog)
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	return Median(xs)
}

func fmtNum(x float64) string {
	switch {
	case math.IsNaN(x):
		return "n/a"
	case x >= 100:
		return fmt.Sprintf("%.0f", x)
	case x >= 10:
		return fmt.Sprintf("%.1f", x)
	}
	return fmt.Sprintf("%.2f", x)
}

// roundsText says how many rounds each workload ran.
func (r *Report) roundsText() string {
	t := fmt.Sprintf("%d rounds per workload, C and Go alternating (C first in even rounds)", r.Rounds)
	if r.ExtraRounds > 0 {
		t += fmt.Sprintf(", %d more where the spread of either side exceeded %.0f%% after them (the table's rounds column)", r.ExtraRounds, 100*r.NoisySpread)
	}
	return t
}

// noisy reports whether either side's values spread more than limit.
func (row *Row) noisy(limit float64) bool {
	return (len(row.C) > 1 && Spread(row.C) > limit) || (len(row.Go) > 1 && Spread(row.Go) > limit)
}

func fmtSpread(xs []float64) string {
	if len(xs) == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.0f%%", 100*Spread(xs))
}

// Table returns the main table as aligned plain text: workload, unit, C
// median, Go median, Go/C, the spread of each side ((max-min)/median over
// the rounds), the target and whether it was met.
func (r *Report) Table() string { return table(r.Rows) }

// ToolTable returns the rows of "The tools as users run them" as Table
// does, the Go column being rdscat's.
func (r *Report) ToolTable() string { return table(r.ToolRows) }

func table(rows []Row) string {
	var sb strings.Builder
	tw := tabwriter.NewWriter(&sb, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "workload\tunit\tC median\tGo median\tGo/C\tspread C\tspread Go\ttarget\tresult")
	for _, row := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", row.Workload, row.Metric,
			fmtNum(median(row.C)), fmtNum(median(row.Go)), fmtRatio(row.Ratio()),
			fmtSpread(row.C), fmtSpread(row.Go), row.Goal, row.Verdict())
	}
	tw.Flush()
	return sb.String()
}

// PairTable returns, for the tools rows with paired rounds, the median of
// the rounds' own Go/C ratios, their range, and in how many rounds Go came
// out better: the way to judge a change with -ab, where the medians of the
// two columns move with the host's load. It is "" when no row has paired
// rounds.
func (r *Report) PairTable() string { return pairTable(r.ToolRows) }

func pairTable(rows []Row) string {
	var sb strings.Builder
	tw := tabwriter.NewWriter(&sb, 0, 0, 2, ' ', 0)
	header := false // sb stays empty until the flush
	for _, row := range rows {
		if len(row.Pairs) == 0 {
			continue
		}
		if !header {
			fmt.Fprintln(tw, "workload\tunit\tpaired rounds\tmedian Go/C\tlowest\thighest\tGo better in")
			header = true
		}
		fmt.Fprintln(tw, strings.Join(row.pairCells(), "\t"))
	}
	tw.Flush()
	return sb.String()
}

// pairCells are the cells of a row's line in the paired tables: workload,
// unit, paired rounds, the median, lowest and highest of their ratios, and
// in how many Go did better.
func (r Row) pairCells() []string {
	better := 0
	for _, x := range r.Pairs {
		if r.Goal.Better(x) {
			better++
		}
	}
	return []string{r.Workload, r.Metric, fmt.Sprint(len(r.Pairs)),
		fmtRatio(Median(r.Pairs)), fmtRatio(slices.Min(r.Pairs)), fmtRatio(slices.Max(r.Pairs)),
		fmt.Sprintf("%d of %d", better, len(r.Pairs))}
}

func fmtRatio(x float64) string {
	if math.IsNaN(x) {
		return "n/a"
	}
	return fmt.Sprintf("%.3f", x)
}

// AllocTable returns the allocation counts as aligned plain text.
func (r *Report) AllocTable() string {
	var sb strings.Builder
	tw := tabwriter.NewWriter(&sb, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "workload\tGo side\thot path\tallocs\tmessages\tallocs/msg\ttarget\tresult")
	for _, a := range r.Allocs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%.6f\t0\t%s\n", a.Workload, a.Side, a.What, a.Allocs, a.Msgs, a.PerMsg(), metWord(a.Met()))
	}
	tw.Flush()
	return sb.String()
}

// RSSTable returns the long-run resident memory as aligned plain text.
func (r *Report) RSSTable() string {
	var sb strings.Builder
	tw := tabwriter.NewWriter(&sb, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "receiver\tworkload\tseconds\tmessages\tRSS start KiB\tRSS 10s KiB\tRSS end KiB\tRSS max KiB\tanon start/10s/end KiB\tGo allocs\ttarget\tresult")
	for _, x := range r.RSS {
		allocs := "-"
		if x.Impl == "Go" {
			allocs = fmt.Sprint(x.Allocs)
		}
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%d\t%d\t%d\t%d\t%d\t%d/%d/%d\t%s\tflat\t%s\n", x.Impl, x.Workload, x.Seconds, x.Msgs, x.StartKiB, x.At10s, x.EndKiB, x.MaxKiB, x.AnonStart, x.Anon10s, x.AnonEnd, allocs, metWord(x.Flat()))
	}
	tw.Flush()
	return sb.String()
}

func metWord(ok bool) string {
	if ok {
		return "met"
	}
	return "missed"
}

// Text returns every table of the report as plain text.
func (r *Report) Text() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "kernel %s, %s, window %v after %v warm-up\n\n", r.Kernel, r.roundsText(), r.Window, r.Warm)
	if len(r.Rows) > 0 {
		sb.WriteString(r.Table())
	}
	if len(r.ToolRows) > 0 {
		sb.WriteString("\nThe tools as users run them (C: rdsstress-c, Go: rdscat stress):\n")
		sb.WriteString(r.ToolTable())
		if pairs := r.PairTable(); pairs != "" {
			sb.WriteString("\nThe same rounds paired (each round's Go/C, C and Go run back to back):\n")
			sb.WriteString(pairs)
		}
	}
	if len(r.ExampleRows) > 0 {
		sb.WriteString("\nThe documented RDMA path (C: rdsstress-c, Go: examples/rdmawrite):\n")
		sb.WriteString(table(r.ExampleRows))
		if pairs := pairTable(r.ExampleRows); pairs != "" {
			sb.WriteString("\nThe same rounds paired:\n")
			sb.WriteString(pairs)
		}
	}
	if r.Settle.Runs > 0 {
		fmt.Fprintf(&sb, "\nRDS/TCP drain: %s\n", r.Settle)
	}
	if len(r.Allocs) > 0 {
		sb.WriteString("\nGo heap allocations in the measurement windows:\n")
		sb.WriteString(r.AllocTable())
	}
	if len(r.RSS) > 0 {
		sb.WriteString("\nReceiver resident memory over the long run:\n")
		sb.WriteString(r.RSSTable())
	}
	if len(r.Diagnoses) > 0 {
		sb.WriteString("\nDiagnosis (median, and ratio to C on both sides):\n")
		sb.WriteString(r.DiagTable())
	}
	if len(r.Failures) > 0 {
		sb.WriteString("\nFailures:\n")
		for _, f := range r.Failures {
			sb.WriteString("  " + f + "\n")
		}
	}
	return sb.String()
}

// DiagTable returns the diagnoses as aligned plain text.
func (r *Report) DiagTable() string {
	var sb strings.Builder
	tw := tabwriter.NewWriter(&sb, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "workload\tunit\tpairing\tmedian\tratio to C\tspread")
	for _, dg := range r.Diagnoses {
		for i, name := range dg.Pairings {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", dg.Workload, dg.Metric, name, fmtNum(median(dg.Values[i])), fmtRatio(dg.ratio(i)), fmtSpread(dg.Values[i]))
		}
	}
	tw.Flush()
	return sb.String()
}

func (dg Diagnosis) ratio(i int) float64 {
	if len(dg.Values) == 0 {
		return math.NaN()
	}
	return safeDiv(median(dg.Values[i]), median(dg.Values[0]))
}

// Meta describes where and how a report was made, for Markdown.
type Meta struct {
	Command string // the command that reproduces the report
	Machine string // host CPU and core count
	Host    string // host kernel or OS
	QEMU    string // qemu version line
	Go      string // Go version
	CC      string // C compiler version line
	Load    string // host load averages before and after the run
}

// Markdown renders the report as the BENCHMARKS.md document.
func (r *Report) Markdown(m Meta) string {
	var sb strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&sb, format, a...) }
	w("# Benchmarks: Go (this library) against a C baseline\n\n")
	w("<!-- Generated by integration/cmd/rdsbench. Do not edit: run the command below again. -->\n\n")
	w("Regenerate with:\n\n    %s\n\n", m.Command)
	w("| | |\n|---|---|\n")
	w("| guest kernel | %s |\n", r.Kernel)
	w("| date | %s |\n", r.Started.UTC().Format("2006-01-02 15:04 MST"))
	w("| machine | %s |\n", m.Machine)
	if m.Host != "" {
		w("| host kernel | %s |\n", m.Host)
	}
	w("| VM | %s, TCG (no KVM), 2 vCPUs, 512 MiB |\n", m.QEMU)
	w("| Go | %s, `CGO_ENABLED=0` static binaries; rdscat with its profile-guided optimization profile cmd/rdscat/default.pgo, as every `go build` of it |\n", m.Go)
	csrc := "integration/internal/bench/cbaseline/rdsbench.c"
	if len(r.ToolRows) > 0 || len(r.ExampleRows) > 0 {
		csrc += ", rdsstress.c"
	}
	if len(r.WakeCode) > 0 {
		csrc += ", wakecode.c"
	}
	w("| C | %s, `gcc -O2 -static` (%s) |\n", m.CC, csrc)
	w("| method | %s; each round is fresh processes; %v warm-up, then a %v window |\n", r.roundsText(), r.Warm, r.Window)
	if r.Settle.Runs > 0 {
		w("| RDS/TCP drain | %s |\n", r.Settle)
	}
	w("| run time | %v |\n", r.Elapsed.Round(time.Second))
	if m.Load != "" {
		w("| host load average (1, 5, 15 min) | %s |\n", m.Load)
	}
	w("\n")
	w("The VM is emulated (TCG), so absolute numbers mean little; the ratios, measured in the same VM in the same run, are what count. ")
	w("Spread is (max-min)/median over the rounds. Go/C is the ratio of the medians: above 1 means Go is faster for rates, slower for latencies and CPU time per message.\n\n")

	if len(r.Rows) > 0 {
		w("## Throughput, latency and RDMA\n\n")
		w("%s\n", mdTable(r.Rows, "C median", "Go median"))
		r.mdWorkloads(w)
	}
	if len(r.ToolRows) > 0 {
		r.mdTools(w)
	}
	if len(r.ExampleRows) > 0 {
		r.mdExample(w)
	}

	if len(r.Allocs) > 0 {
		w("## Allocations\n\n")
		w("Go heap objects allocated (runtime.MemStats.Mallocs) during the measurement windows, summed over the rounds. Target: zero per message in steady state. The count covers the whole Go process, so allocations that do not grow with the message count appear as a handful per window (with `-allocsites` the command shows their call sites: sync.Pool refilling the per-P cache of a P the goroutine moved to, the runtime's scavenger timer); the target counts as met below one allocation per hundred messages, while an allocation on the message path gives at least one per message. Senders wait out congestion with `Config.WaitCongested`, which allocates nothing; without it a congested send returns ErrCongested, an allocated error value.\n\n")
		w("| workload | Go side | hot path | allocs | messages | allocs/msg | result |\n|---|---|---|--:|--:|--:|---|\n")
		for _, a := range r.Allocs {
			w("| %s | %s | %s | %d | %d | %.6f | %s |\n", a.Workload, a.Side, a.What, a.Allocs, a.Msgs, a.PerMsg(), metWord(a.Met()))
		}
		w("\n")
	}
	if len(r.RSS) > 0 {
		w("## Receiver memory over a long run\n\n")
		w("C and Go receivers run at the same time (each fed by a sender of its own language) over RDS/TCP, each message carrying an SCM_TIMESTAMP control message that the receiver parses. The window starts after %v of traffic. RSS (and its anonymous part: heap and stacks) from /proc/self/smaps_rollup at the start and end of the window, and the largest RSS seen (sampled every second). Also the values ten seconds into the window. Target: flat, read as RSS at the end at most 5%% above the start and at most 1%% above the value at ten seconds (a one-time step early on is tolerated, a climb is not).\n\n", r.LongWarm)
		w("| receiver | workload | seconds | messages | RSS start KiB | RSS 10 s KiB | RSS end KiB | RSS max KiB | anon start / 10 s / end KiB | Go allocs | result |\n|---|---|--:|--:|--:|--:|--:|--:|--:|--:|---|\n")
		for _, x := range r.RSS {
			allocs := "-"
			if x.Impl == "Go" {
				allocs = fmt.Sprint(x.Allocs)
			}
			w("| %s | %s | %.0f | %d | %d | %d | %d | %d | %d / %d / %d | %s | %s |\n", x.Impl, x.Workload, x.Seconds, x.Msgs, x.StartKiB, x.At10s, x.EndKiB, x.MaxKiB, x.AnonStart, x.Anon10s, x.AnonEnd, allocs, metWord(x.Flat()))
		}
		w("\n")
	}
	if g := r.batchGains(); g != "" {
		w("## What batching buys\n\n")
		w("Median message rates of the batch rows divided by the C rate without batching, same run.\n\n")
		w("| workload | C batch / C plain | Go batch / C plain | Go batch / Go plain |\n|---|--:|--:|--:|\n")
		w("%s\n", g)
	}
	if len(r.Diagnoses) > 0 {
		w("## Diagnosis: which side limits Go\n\n")
		w("The same workloads with each side chosen separately, rounds rotating through the pairings, same run. ")
		w("`Go raw` is a diagnostic Go worker (integration/internal/bench/raw_linux.go) that waits in the same runtime poller but issues sendmsg/recvmsg with unix.RawSyscall, which skips the runtime's system-call bookkeeping (entersyscall/exitsyscall); it shows what that bookkeeping costs here. `Go blocking` switches the socket to blocking mode and calls sendmsg/recvmsg with plain unix.Syscall outside the poller, as the C program does: it shows what waiting in the poller costs. `Go GOMAXPROCS=1` is the plain Go worker limited to one P (worker argument procs=1): it shows what the runtime's other threads (idle Ms spinning for work after every wake-up) cost the VM's two CPUs, which the kernel's own RDS and TCP work needs as well.\n\n")
		w("| workload | unit | pairing | median | ratio to C | spread |\n|---|---|---|--:|--:|--:|\n")
		for _, dg := range r.Diagnoses {
			for i, name := range dg.Pairings {
				w("| %s | %s | %s | %s | %s | %s |\n", dg.Workload, dg.Metric, name, fmtNum(median(dg.Values[i])), fmtRatio(dg.ratio(i)), fmtSpread(dg.Values[i]))
			}
		}
		w("\n")
	}
	if len(r.WakeCode) > 0 {
		r.mdWakeCode(w)
	}
	if len(r.Failures) > 0 {
		w("## Failures\n\n")
		for _, f := range r.Failures {
			w("- %s\n", f)
		}
		w("\n")
	}
	return sb.String()
}

func mdGoal(g Goal) string {
	return strings.NewReplacer(">=", "≥", "<=", "≤").Replace(g.String())
}

// batchGains pairs each batch row with the row of the same workload
// without batching.
func (r *Report) batchGains() string {
	// Only the message rates: a workload's other rows (CPU time per
	// message) have the same workload name.
	const rate = "msg/s"
	plain := map[string]Row{}
	for _, row := range r.Rows {
		if row.Metric == rate {
			plain[row.Workload] = row
		}
	}
	var sb strings.Builder
	for _, row := range r.Rows {
		base, ok := strings.CutSuffix(row.Workload, fmt.Sprintf(" batch%d", BatchSize))
		if !ok || row.Metric != rate {
			continue
		}
		p, ok := plain[base]
		if !ok {
			continue
		}
		cp, gp := Median(p.C), Median(p.Go)
		cb, gb := Median(row.C), Median(row.Go)
		fmt.Fprintf(&sb, "| %s | %s | %s | %s |\n", base, fmtRatio(safeDiv(cb, cp)), fmtRatio(safeDiv(gb, cp)), fmtRatio(safeDiv(gb, gp)))
	}
	return sb.String()
}

func safeDiv(a, b float64) float64 {
	if b == 0 || math.IsNaN(a) || math.IsNaN(b) {
		return math.NaN()
	}
	return a / b
}

// mdWorkloads explains the workloads of the first table.
func (r *Report) mdWorkloads(w func(string, ...any)) {
	w("Workloads: `tput` is one-way throughput (a sender floods, the receiver's message rate counts; the receiver is bound to CPU 1 and the sender to CPU 0) over `loop` (127.0.0.1 to 127.0.0.2, the loopback transport; two addresses give each direction its own RDS connection, as two hosts have) or `tcp` (RDS/TCP from the initial namespace to a receiver in another namespace over a veth pair). ")
	w("`batch%d` rows receive with recvmmsg (%d messages per call) on both sides and send with WriteBatch on the Go side; the C sender stays a sendmsg loop, since RDS rejects sendmmsg (its MSG_BATCH flag gives EOPNOTSUPP), and WriteBatch itself issues one sendmsg per message. ", BatchSize, BatchSize)
	w("`rr` is request/response with 64-byte messages (an echo server in the other namespace for `tcp`); both processes are bound to CPU 0, since a wake-up across the emulated CPUs waits for the host to run the other vCPU thread, which on a busy host made whole rounds take milliseconds per round trip. `rr ... spin` rows busy-poll each receive for up to %s (loop) or %s (tcp) before waiting, on both sides: Go with `Config.BusyPoll`, C with MSG_DONTWAIT retries and sched_yield before a blocking recvmsg; plain `rr` rows wait at once (Go in the runtime poller, C blocked in recvmsg). `switches/RT` is the whole VM's context switches (the `ctxt` line of /proc/stat) over the window divided by the round trips: where Go and C need the same number, a latency gap is CPU time spent between the switches, not extra sleeps. ", BusySpinLoop, BusySpinTCP)
	w("`rdma write` issues RDMA WRITEs of %s with RDS_RDMA_NOTIFY_ME over Soft-RoCE into a region the target registered once with RDS_CMSG_RDMA_MAP, one at a time (qd1) or 16 outstanding (qd16); a completion is the RDS_CMSG_RDMA_STATUS notice.\n\n", sizeName(RDMASize))
	w("The C programs use blocking sockets (a congested destination makes sendmsg sleep in the kernel); the Go workers use rdssock's non-blocking sockets in the runtime poller with `Config.WaitCongested`, so a send to a congested port waits in the poller until the kernel's congestion update (RDS_CONG_MONITOR) wakes it.\n\n")
	w("`CPU us/msg` rows are the user and system CPU time of each process over the window divided by the window's messages (round trips for `rr`, completions for `rdma`): utime+stime of the process and its children from /proc/PID/stat, read by the driver when the measuring worker prints the line that opens its window and when it prints its result. /proc counts in clock ticks of 10 ms, so a side that uses little CPU in the window is coarse. Target: Go/C at most %.2f.\n\n", GoalCPU.Ratio)
}

// mdTable renders rows as a Markdown table whose median columns are named
// cName and goName.
func mdTable(rows []Row, cName, goName string) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "| workload | unit | rounds | %s | %s | Go/C | spread C | spread Go | target | result |\n", cName, goName)
	sb.WriteString("|---|---|--:|--:|--:|--:|--:|--:|---|---|\n")
	for _, row := range rows {
		fmt.Fprintf(&sb, "| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s |\n", row.Workload, row.Metric, max(len(row.C), len(row.Go)),
			fmtNum(median(row.C)), fmtNum(median(row.Go)), fmtRatio(row.Ratio()),
			fmtSpread(row.C), fmtSpread(row.Go), mdGoal(row.Goal), row.Verdict())
	}
	return sb.String()
}

// mdTools renders "The tools as users run them".
func (r *Report) mdTools(w func(string, ...any)) {
	w("## The tools as users run them\n\n")
	w("The `rdscat` binary (cmd/rdscat, `rdscat stress`) against the C stress baseline integration/internal/bench/cbaseline/rdsstress.c (`rdsstress-c`, one forked process per task with one poll() loop each, as rds-stress does), each as two processes: a receiver (`rdscat stress -listen ADDR:PORT -once`, `rdsstress-c passive`) and a sender (`rdscat stress -to ADDR:PORT`, `rdsstress-c active`), with the same tasks, depth and sizes; with several tasks both rdscat ends get `-ports` with the task count, so that each task has a receiving socket and goroutine of its own, as each has a passive process of its own in C. ")
	w("`tcp` rows run the receiver in the peer namespace and the sender in the initial one, over RDS/TCP on a veth pair; `ib` and `rdma` rows use the two addresses of one Soft-RoCE (rxe) link. Neither process is bound to a CPU. ")
	w("`rr TxD` is T tasks (sender sockets) with D requests in flight each, every request answered by an ack of the same size; `oneway` streams messages with no answer; `rdma write ib` and `rdma read ib` issue RDMA operations of the size given with immediate data and a completion notice each, D in flight, into (out of) buffers the receiver registered once.\n\n")
	w("The window is the driver's, the same for both tools: it opens %v after the workload's RDS counter (RDS_INFO_COUNTERS) first moves and lasts %v; at both edges the driver reads the counter and the CPU time of both process trees. The rate is requests (`recv_delivered`, requests plus acks, halved), messages (`recv_delivered`) or RDMA operations (`send_rdma`) per second in the window: counted by the kernel, so that each tool's protocol messages (rdscat's RDMA hello and buffer announcements) do not count. Each tool is told to send for %v more than the warm-up and the window, to cover its start; a round whose window ends after that fails, and every round must end with each tool's own accounting complete (exit status 0: every request answered, every message and operation counted by the receiver); for RDMA the kernel's count over the whole run must also equal the operations the tool says it issued. ", r.Warm, r.Window, r.ToolSlack)
	w("`CPU us/msg` is utime+stime from /proc/PID/stat of the sender's or the receiver's process and its children (the C tasks) over the window, per request, message or operation. Targets: rates at least %.2f of C, CPU per message at most %.2f.\n\n", GoalThroughput.Ratio, GoalCPU.Ratio)
	w("%s\n", mdTable(r.ToolRows, "C median", "rdscat median"))
	if pairs := mdPairs(r.ToolRows, "rdscat"); pairs != "" {
		w("The same rounds paired: each round runs C and rdscat back to back, so its own rdscat/C leaves out the drift of the host's load between rounds that widens the spreads above. The verdicts above stay on the ratio of the medians; this table shows, for each row, the median of the rounds' own ratios, their range, and in how many rounds rdscat did better (a higher rate, less CPU).\n\n")
		w("%s\n", pairs)
	}
}

// mdExample renders "The documented RDMA path".
func (r *Report) mdExample(w func(string, ...any)) {
	w("## The documented RDMA path\n\n")
	w("examples/rdmawrite, the rdmaops package example as a program (written only against the public API as the package documentation teaches it: the active side calls `Do` and `Conn.Wait`, the passive side `Conn.ReadMsg`), against the same C baseline as the `rdma` rows above, run the same way: two processes on the two addresses of the Soft-RoCE link, the same window, counters and checks. ")
	w("`write` issues RDMA WRITEs with immediate data, `read` RDMA READs whose immediate data follows once the READ is done (fenced), each with a completion notice, D in flight (`qdD`), into (out of) a buffer the passive side registered once. ")
	w("Both sides of the example run with `-verify=false` and the active side with `-duration`: the program then neither writes nor checks the data and its passive side sends no acknowledgements, as the C baseline does not. Targets as above: rates at least %.2f of C, CPU per operation at most %.2f.\n\n", GoalThroughput.Ratio, GoalCPU.Ratio)
	w("%s\n", mdTable(r.ExampleRows, "C median", "example median"))
	if pairs := mdPairs(r.ExampleRows, "example"); pairs != "" {
		w("The same rounds paired, as above:\n\n%s\n", pairs)
	}
}

// mdPairs renders the rows' paired rounds as a markdown table whose Go
// side is goName, or "" when no row has paired rounds.
func mdPairs(rows []Row, goName string) string {
	var sb strings.Builder
	for _, row := range rows {
		if len(row.Pairs) == 0 {
			continue
		}
		if sb.Len() == 0 {
			fmt.Fprintf(&sb, "| workload | unit | paired rounds | median %s/C | lowest | highest | %s better in |\n", goName, goName)
			sb.WriteString("|---|---|--:|--:|--:|--:|--:|\n")
		}
		fmt.Fprintf(&sb, "| %s |\n", strings.Join(row.pairCells(), " | "))
	}
	return sb.String()
}

// wakeRow returns the measured configuration of lang with k calls of
// mode (any mode when k is 0), or nil.
func (r *Report) wakeRow(lang, mode string, k int) *WakeCost {
	for i, c := range r.WakeCode {
		if c.Lang == lang && (c.Mode == mode || k == 0) && c.K == k && len(c.UserUS) > 0 {
			return &r.WakeCode[i]
		}
	}
	return nil
}

func (r *Report) mdWakeCode(w func(string, ...any)) {
	w("## What the VM charges for code\n\n")
	w("Two processes of one language pass a byte back and forth over two pipes, each waking for every byte as the two ends of a request/response exchange do; after each wake-up both run some small code before they answer: %d calls of one small function (each a test and an add or an xor, a few instructions; `repeated`), one call each of %d different ones (`distinct`), or the bodies of those %d functions written one after another in one function, without the calls (`inlined`: the instructions of `distinct` less each call and return). ", WakeK, WakeK, WakeK)
	w("The table gives the user CPU time per message of the process that measures (getrusage over %d messages after 2000 of warm-up; the median of the rounds, which alternate which language goes first) and, from it, what one call or one inlined body adds. ", WakeMsgs)
	w("C is integration/internal/bench/cbaseline/wakecode.c, Go the rdsbench worker role `wakecode` (integration/internal/bench/wakecode_linux.go), with the same functions, each compiled to one basic block, and the same system calls (Go's raw, as rdssock's are, so that the runtime's path for a system call that blocks is not part of it).\n\n")
	w("| language | rounds | no calls: us/msg | %d repeated: us/msg | %d distinct: us/msg | %d inlined: us/msg | ns per repeated call | ns per distinct call | ns per inlined body | spread (distinct) |\n|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n", WakeK, WakeK, WakeK)
	per := map[string][3]float64{} // ns per repeated call, per distinct call, per inlined body
	inlined := map[string]bool{}
	for _, lang := range []string{"C", "Go"} {
		r0, r1, r2, r3 := r.wakeRow(lang, "", 0), r.wakeRow(lang, "repeated", WakeK), r.wakeRow(lang, "distinct", WakeK), r.wakeRow(lang, "inlined", WakeK)
		if r0 == nil || r1 == nil || r2 == nil {
			continue
		}
		none, rep, dis := median(r0.UserUS), median(r1.UserUS), median(r2.UserUS)
		rounds, spread := len(r2.UserUS), fmtSpread(r2.UserUS)
		p := [3]float64{(rep - none) * 1000 / WakeK, (dis - none) * 1000 / WakeK}
		inl, inlPer := "-", "-"
		if r3 != nil {
			in := median(r3.UserUS)
			p[2] = (in - none) * 1000 / WakeK
			inl, inlPer, inlined[lang] = fmtNum(in), fmtNum(p[2]), true
		}
		per[lang] = p
		w("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |\n", lang, rounds, fmtNum(none), fmtNum(rep), fmtNum(dis), inl,
			fmtNum(p[0]), fmtNum(p[1]), inlPer, spread)
	}
	w("\n")
	c, cok := per["C"]
	g, gok := per["Go"]
	if !cok || !gok {
		return
	}
	w("In this run a call of code that ran once since the last wake-up cost %s times a repeated call in C and %s times in Go, and such a call cost Go %s times what it cost C. ",
		fmtRatio(safeDiv(c[1], c[0])), fmtRatio(safeDiv(g[1], g[0])), fmtRatio(safeDiv(g[1], c[1])))
	callsCost := false
	if inlined["C"] && inlined["Go"] {
		fc, fg := safeDiv(c[2], c[1]), safeDiv(g[2], g[1])
		w("Written inline, the same code cost %s per body in C and %s in Go: %s and %s of a distinct call. ", fmtBody(c[2]), fmtBody(g[2]), fmtRatio(fc), fmtRatio(fg))
		callsCost = fc < wakeCallsShare && fg < wakeCallsShare
	}
	if callsCost {
		w("So what the VM charges for code that ran once since the last wake-up is in its calls and returns far more than in its instructions: every call that a Go side makes per message and the C side does not weighs about a distinct call in the CPU time per message of the rows above, and a run of instructions without calls weighs little. ")
		w("A likely place is the emulator's lookup of translated code for a jump whose target it has not cached since the last wake-up (every return is such a jump). rdsinstr (integration/cmd/rdsinstr) counts the instructions and the calls per message on the host.\n\n")
		return
	}
	w("Why code that ran once since the last wake-up costs more is not measured here; the emulator's per-CPU caches of translated code and of address translations, through which the kernel's work and the other process run between two wake-ups, are the likely place. ")
	w("Every instruction that a Go side runs per message and the C side does not is code of that kind, and the CPU time per message in the rows above weighs it so; rdsinstr (integration/cmd/rdsinstr) counts those instructions on the host.\n\n")
}

// fmtBody formats what one inlined body added: nothing measurable when
// the run with the bodies took no longer than the one without.
func fmtBody(ns float64) string {
	if ns <= 0 {
		return "nothing measurable"
	}
	return fmtNum(ns) + " ns"
}

// wakeCallsShare is the share of a distinct call's cost below which an
// inlined body's, in both languages, shows that the calls are what costs.
const wakeCallsShare = 0.25
