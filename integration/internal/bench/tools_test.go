package bench

import (
	"math"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestToolWorkloads(t *testing.T) {
	ws := ToolWorkloads()
	names := map[string]ToolWorkload{}
	for _, w := range ws {
		if _, dup := names[w.Name]; dup {
			t.Errorf("duplicate tool workload %q", w.Name)
		}
		names[w.Name] = w
		if w.RDMA() != (w.Path == PathIB && w.Mode != ToolRR) || w.Tasks < 1 || w.Depth < 1 || w.Size < 32 {
			t.Errorf("odd tool workload %+v", w)
		}
	}
	// The rows issue 13 asks for.
	want := []string{"rr tcp 1x1 64B", "rr tcp 1x4 64B", "rr tcp 4x8 64B", "rr tcp 1x1 1KiB", "rr tcp 1x4 1KiB", "rr tcp 4x8 1KiB", "rr ib 1x4 1KiB",
		"oneway tcp 64B", "oneway tcp 4KiB"}
	for _, op := range []string{"write", "read"} {
		for _, size := range []string{"4KiB", "16KiB"} {
			for _, d := range []string{"1", "4", "16"} {
				want = append(want, "rdma "+op+" ib "+size+" qd"+d)
			}
		}
	}
	for _, n := range want {
		if _, ok := names[n]; !ok {
			t.Errorf("no tool workload %q", n)
		}
	}
	if len(ws) != len(want) {
		t.Errorf("%d tool workloads, want %d", len(ws), len(want))
	}
	if w := names["rr tcp 4x8 1KiB"]; w.Tasks != 4 || w.Depth != 8 || w.Size != 1024 || w.Mode != ToolRR || w.Path != PathTCP {
		t.Errorf("rr tcp 4x8 1KiB = %+v", w)
	}
	if w := names["rdma read ib 16KiB qd4"]; w.Mode != ToolRead || w.Depth != 4 || w.Size != 16<<10 || w.Path != PathIB {
		t.Errorf("rdma read ib 16KiB qd4 = %+v", w)
	}

	if got := SelectTools(ws, "tools"); len(got) != len(ws) {
		t.Errorf("-run tools selected %d of %d", len(got), len(ws))
	}
	if got := SelectTools(ws, "tools rr,qd16"); len(got) != 7+4 {
		t.Errorf("-run \"tools rr,qd16\" selected %d, want 11", len(got))
	}
	// The library's workload names select no tool row.
	for _, w := range DefaultWorkloads() {
		if got := SelectTools(ws, w.Name); len(got) != 0 {
			t.Errorf("-run %q selects tool rows %v", w.Name, got)
		}
	}
	if got := Select(DefaultWorkloads(), "tools"); len(got) != 0 {
		t.Errorf("-run tools selects library workloads %v", got)
	}
}

func TestToolCounter(t *testing.T) {
	for _, tc := range []struct {
		mode ToolMode
		name string
		per  float64
		unit string
	}{
		{ToolRR, "recv_delivered", 2, "req/s"},
		{ToolOneway, "recv_delivered", 1, "msg/s"},
		{ToolWrite, "send_rdma", 1, "ops/s"},
		{ToolRead, "send_rdma", 1, "ops/s"},
	} {
		w := ToolWorkload{Mode: tc.mode}
		if n, per := w.Counter(); n != tc.name || per != tc.per || w.Unit() != tc.unit {
			t.Errorf("%s: counter %s/%v, unit %s; want %s/%v, %s", tc.mode, n, per, w.Unit(), tc.name, tc.per, tc.unit)
		}
	}
}

func TestToolArgs(t *testing.T) {
	run := toolRun{Receiver: netip.MustParseAddrPort("10.11.0.2:20010"), Sender: netip.MustParseAddr("10.11.0.1"), NetNS: "rdspeer",
		Duration: 4500 * time.Millisecond, Ready: "/tmp/ready"}
	rr := ToolWorkload{Mode: ToolRR, Path: PathTCP, Tasks: 4, Depth: 8, Size: 1024}
	pa, aa := rr.CArgs(run)
	for _, want := range []string{"passive", "bind=10.11.0.2:20010", "tasks=4", "size=1024", "netns=/run/netns/rdspeer"} {
		if !slices.Contains(pa, want) {
			t.Errorf("C passive %q lacks %q", pa, want)
		}
	}
	for _, want := range []string{"active", "bind=10.11.0.1", "peer=10.11.0.2:20010", "tasks=4", "depth=8", "warm=0", "dur=4.5", "mode=rr", "size=1024", "ack-size=1024"} {
		if !slices.Contains(aa, want) {
			t.Errorf("C active %q lacks %q", aa, want)
		}
	}
	ra, sa := rr.RdscatArgs(run)
	for _, want := range []string{"stress -listen 10.11.0.2:20010 -once -json -q -ready /tmp/ready", "-netns rdspeer", "-size 1024", "-ports 4"} {
		if !strings.Contains(strings.Join(ra, " "), want) {
			t.Errorf("rdscat receiver %q lacks %q", ra, want)
		}
	}
	for _, want := range []string{"stress -to 10.11.0.2:20010 -from 10.11.0.1 -tasks 4 -depth 8 -duration 4.5s", "-mode rr -size 1024 -ack-size 1024", "-ports 4"} {
		if !strings.Contains(strings.Join(sa, " "), want) {
			t.Errorf("rdscat sender %q lacks %q", sa, want)
		}
	}

	ib := toolRun{Receiver: netip.MustParseAddrPort("10.22.0.2:20020"), Sender: netip.MustParseAddr("10.22.0.1"), Duration: 3 * time.Second, Ready: "/tmp/r"}
	rd := ToolWorkload{Mode: ToolRead, Path: PathIB, Tasks: 1, Depth: 16, Size: 4096}
	pa, aa = rd.CArgs(ib)
	if strings.Contains(strings.Join(pa, " "), "size=") || strings.Contains(strings.Join(pa, " "), "netns") {
		t.Errorf("C RDMA passive %q: want neither size= nor netns=", pa)
	}
	if j := strings.Join(aa, " "); !strings.Contains(j, "rdma=read rdma-size=4096") || strings.Contains(j, "mode=") {
		t.Errorf("C RDMA active %q", aa)
	}
	ra, sa = rd.RdscatArgs(ib)
	if j := strings.Join(ra, " "); strings.Contains(j, "-size") || strings.Contains(j, "-netns") || strings.Contains(j, "-ports") {
		t.Errorf("rdscat RDMA receiver %q: want neither -size nor -netns, and one port for one task", ra)
	}
	// rdscat refuses -mode and -size together with -rdma.
	if j := strings.Join(sa, " "); !strings.Contains(j, "-rdma read -rdma-size 4096") || strings.Contains(j, "-mode") || strings.Contains(j, " -size") {
		t.Errorf("rdscat RDMA sender %q", sa)
	}
}

func TestParseStressSummary(t *testing.T) {
	out := `a note on the way
{
  "sender": {
    "mode": "rr",
    "seconds": 4.5,
    "sent": 9000,
    "acked": 9000,
    "receiver_counted": 9000,
    "counts_match": true,
    "errors": 0,
    "msgs_per_sec": 2000,
    "latency_us": {"count": 9000, "p50": 400}
  }
}
`
	s, err := ParseStressSummary(out)
	if err != nil {
		t.Fatal(err)
	}
	if s.Sender == nil || s.Receiver != nil || s.Sender.Sent != 9000 || !s.Sender.CountsMatch || s.Sender.MsgsPerSec != 2000 || s.Sender.Seconds != 4.5 {
		t.Errorf("ParseStressSummary = %+v", s.Sender)
	}
	s, err = ParseStressSummary(`{"receiver": {"received": 12, "msgs_per_sec": 3.5}}`)
	if err != nil || s.Receiver == nil || s.Receiver.Received != 12 {
		t.Errorf("receiver summary: %+v, %v", s, err)
	}
	for _, bad := range []string{"", "stress receiver on 10.0.0.1:4000\n", "{\"sender\": ", "{}"} {
		if _, err := ParseStressSummary(bad); err == nil {
			t.Errorf("ParseStressSummary(%q) succeeded", bad)
		}
	}
}

func TestToolMeasure(t *testing.T) {
	t0 := time.Unix(1000, 0)
	a := ToolSample{At: t0, Count: 1000, Sender: 50, Receiver: 70}
	// 2 s, 8000 deliveries (4000 round trips), sender 100 ticks (1 s),
	// receiver 60 ticks.
	b := ToolSample{At: t0.Add(2 * time.Second), Count: 9000, Sender: 150, Receiver: 130}
	rate, cs, cr, err := ToolMeasure(ToolWorkload{Mode: ToolRR}, a, b)
	if err != nil {
		t.Fatal(err)
	}
	if rate != 2000 || math.Abs(cs-250) > 1e-9 || math.Abs(cr-150) > 1e-9 {
		t.Errorf("rr: rate %v, CPU %v + %v us; want 2000, 250 + 150", rate, cs, cr)
	}
	rate, cs, _, err = ToolMeasure(ToolWorkload{Mode: ToolWrite}, a, b)
	if err != nil || rate != 4000 || math.Abs(cs-125) > 1e-9 {
		t.Errorf("write: rate %v, CPU %v, %v; want 4000, 125", rate, cs, err)
	}
	if _, _, _, err := ToolMeasure(ToolWorkload{Mode: ToolRR}, a, a); err == nil {
		t.Error("an empty window measured without error")
	}
	if _, _, _, err := ToolMeasure(ToolWorkload{Mode: ToolOneway}, b, a); err == nil {
		t.Error("readings in the wrong order measured without error")
	}
	same := b
	same.Count = a.Count
	if _, _, _, err := ToolMeasure(ToolWorkload{Mode: ToolOneway}, a, same); err == nil {
		t.Error("a window without traffic measured without error")
	}
}

func TestSchedUsePerUnit(t *testing.T) {
	a := SchedUse{UserTicks: 10, Voluntary: 100, Involuntary: 10}
	// 4000 units: 20 ticks (200 ms) of user time, 8000 + 400 switches.
	b := SchedUse{UserTicks: 30, Voluntary: 8100, Involuntary: 410}
	user, vol, invol := b.PerUnit(a, 4000)
	if math.Abs(user-50) > 1e-9 || vol != 2 || invol != 0.1 {
		t.Errorf("PerUnit = %v us, %v, %v switches; want 50, 2, 0.1", user, vol, invol)
	}
	if user, vol, invol := b.PerUnit(a, 0); user != 0 || vol != 0 || invol != 0 {
		t.Errorf("PerUnit without units = %v, %v, %v; want zeros", user, vol, invol)
	}
}

func TestToolReportRendering(t *testing.T) {
	rep := &Report{
		Kernel: "6.1.0-test", Rounds: 2, Warm: time.Second, Window: 2 * time.Second, ToolSlack: 2 * time.Second,
		Rows: []Row{
			{Workload: "rr tcp 64B", Metric: "p50 us", Goal: GoalLatencyP50, C: []float64{400}, Go: []float64{420}},
			{Workload: "rr tcp 64B", Metric: CPULabel("client"), Goal: GoalCPU, C: []float64{100, 120}, Go: []float64{130, 150}},
		},
		ToolRows: []Row{
			{Workload: "rr tcp 1x4 1KiB", Metric: "req/s", Goal: GoalThroughput, C: []float64{2500, 2600}, Go: []float64{1500, 1600}},
			{Workload: "rr tcp 1x4 1KiB", Metric: CPULabel("sender"), Goal: GoalCPU, C: []float64{200}, Go: []float64{210}},
		},
	}
	text := rep.Text()
	for _, want := range []string{"The tools as users run them", "rr tcp 1x4 1KiB", "0.608", "CPU us/msg client", "1.273", "CPU us/msg sender", "1.050"} {
		if !strings.Contains(text, want) {
			t.Errorf("Text lacks %q:\n%s", want, text)
		}
	}
	md := rep.Markdown(Meta{Command: "go run ./integration/cmd/rdsbench"})
	for _, want := range []string{
		"## Throughput, latency and RDMA", "| rr tcp 64B | CPU us/msg client | 2 | 110 | 140 | 1.273 | 18% | 14% | ≤ 1.10 | missed |",
		"## The tools as users run them", "| workload | unit | rounds | C median | rdscat median |",
		"| rr tcp 1x4 1KiB | req/s | 2 | 2550 | 1550 | 0.608 |", "| rr tcp 1x4 1KiB | CPU us/msg sender | 1 | 200 | 210 | 1.050 | 0% | 0% | ≤ 1.10 | met |",
		"rdsbench.c, rdsstress.c",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q", want)
		}
	}
	if i, j := strings.Index(md, "## Throughput"), strings.Index(md, "## The tools"); i < 0 || j < i {
		t.Error("the tools section does not follow the library's")
	}
	// Without library rows (-run tools) only the tools section is there.
	rep.Rows = nil
	if md := rep.Markdown(Meta{}); strings.Contains(md, "## Throughput") || !strings.Contains(md, "## The tools") {
		t.Error("a tools-only report renders the library section or lacks its own")
	}
}

// TestPairTable: the paired table gives each tools row's median of the
// rounds' own ratios, their range, and the rounds in which Go did better
// (a higher rate, a lower cost); rows without pairs are left out, and so
// is the whole table from Text when no row has any.
func TestPairTable(t *testing.T) {
	r := &Report{ToolRows: []Row{
		{Workload: "rr tcp 1x1 64B", Metric: "req/s", Goal: GoalThroughput, Pairs: []float64{0.9, 1.2, 1.05}},
		{Workload: "rr tcp 1x1 64B", Metric: "CPU us/msg sender", Goal: GoalCPU, Pairs: []float64{0.9, 1.2, 1.05, 0.8}},
		{Workload: "oneway tcp 64B", Metric: "msg/s", Goal: GoalThroughput},
	}}
	got := r.PairTable()
	for _, want := range []string{
		"rr tcp 1x1 64B  req/s              3              1.050        0.900   1.200    2 of 3",
		"rr tcp 1x1 64B  CPU us/msg sender  4              0.975        0.800   1.200    2 of 4",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("PairTable lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "oneway") {
		t.Errorf("PairTable lists a row without pairs:\n%s", got)
	}
	if n, lines := strings.Count(got, "paired rounds"), strings.Count(got, "\n"); n != 1 || lines != 3 {
		t.Errorf("PairTable has %d headers and %d lines, want 1 header and 3 lines:\n%s", n, lines, got)
	}
	if md := mdPairs(r.ToolRows, "rdscat"); !strings.Contains(md, "| rr tcp 1x1 64B | CPU us/msg sender | 4 | 0.975 | 0.800 | 1.200 | 2 of 4 |") || strings.Contains(md, "oneway") || strings.Count(md, "\n") != 4 {
		t.Errorf("mdPairs:\n%s", md)
	}
	if !strings.Contains(r.Text(), "The same rounds paired") {
		t.Error("Text leaves out the paired table")
	}
	r.ToolRows = r.ToolRows[2:]
	if strings.Contains(r.Text(), "The same rounds paired") || mdPairs(r.ToolRows, "rdscat") != "" {
		t.Error("an empty paired table is shown")
	}
}

// TestExampleWorkloads: the example rows are RDMA WRITE and READ of 4 KiB
// at depth 1 and 16, selected by "tools example" and not by "tools rdma"
// (the rdscat rows, which A/B runs compare).
func TestExampleWorkloads(t *testing.T) {
	ws := ExampleWorkloads()
	var names []string
	for _, w := range ws {
		if !w.Example || !w.RDMA() || w.Tasks != 1 || w.Size != 4<<10 {
			t.Errorf("%+v: want a one-task RDMA example row of 4 KiB", w)
		}
		names = append(names, w.Name)
	}
	want := []string{"example write ib 4KiB qd1", "example write ib 4KiB qd16", "example read ib 4KiB qd1", "example read ib 4KiB qd16"}
	if !slices.Equal(names, want) {
		t.Errorf("ExampleWorkloads: %q, want %q", names, want)
	}
	all := append(ToolWorkloads(), ws...)
	if got := SelectTools(all, "tools example"); len(got) != len(ws) {
		t.Errorf("-run \"tools example\" selects %d rows, want %d", len(got), len(ws))
	}
	for _, w := range SelectTools(all, "tools rdma") {
		if w.Example {
			t.Errorf("-run \"tools rdma\" selects the example row %q", w.Name)
		}
	}
}

// TestExampleArgs: both sides of the example get the same operation,
// depth, size and -verify=false; the active side binds the port after the
// receiver's, which the passive side names as its peer, and issues for the
// run's duration.
func TestExampleArgs(t *testing.T) {
	w := ExampleWorkloads()[1] // write, depth 16
	r := toolRun{Receiver: netip.MustParseAddrPort("10.0.0.2:4000"), Sender: netip.MustParseAddr("10.0.0.1"), Duration: 4500 * time.Millisecond}
	p, a := w.ExampleArgs(r)
	ps, as := strings.Join(p, " "), strings.Join(a, " ")
	for _, want := range []string{"-role passive", "-local 10.0.0.2:4000", "-peer 10.0.0.1:4001", "-op write", "-depth 16", "-size 4096", "-verify=false"} {
		if !strings.Contains(ps, want) {
			t.Errorf("passive args %q lack %q", ps, want)
		}
	}
	for _, want := range []string{"-role active", "-local 10.0.0.1:4001", "-peer 10.0.0.2:4000", "-duration 4.5s", "-op write", "-depth 16", "-verify=false"} {
		if !strings.Contains(as, want) {
			t.Errorf("active args %q lack %q", as, want)
		}
	}
}

// TestParseExampleResult reads the active side's rate and issued count,
// skipping the passive side's line, and refuses output without them.
func TestParseExampleResult(t *testing.T) {
	out := "RESULT role=passive op=write ops=9 immediate=9\nRESULT role=active op=write depth=1 size=4096 ops=3000 secs=4.500 rate=666.7 failed=0 verified=0 retried=2 recoveries=1 issued=3002\n"
	rate, issued, err := ParseExampleResult(out)
	if err != nil || rate != 666.7 || issued != 3002 {
		t.Errorf("ParseExampleResult = %v, %v, %v; want 666.7, 3002, nil", rate, issued, err)
	}
	for _, bad := range []string{"", "RESULT role=passive ops=9\n", "RESULT role=active rate=1.5\n", "RESULT role=active rate=x issued=3\n"} {
		if _, _, err := ParseExampleResult(bad); err == nil {
			t.Errorf("ParseExampleResult(%q) accepted it", bad)
		}
	}
}

// TestExampleSection: example rows render in a section of their own,
// with their paired rounds, and stay out of the tools tables.
func TestExampleSection(t *testing.T) {
	r := &Report{
		ToolRows:    []Row{{Workload: "rdma write ib 4KiB qd1", Metric: "ops/s", Goal: GoalThroughput, C: []float64{10}, Go: []float64{9}, Pairs: []float64{0.9}}},
		ExampleRows: []Row{{Workload: "example write ib 4KiB qd1", Metric: "ops/s", Goal: GoalThroughput, C: []float64{10}, Go: []float64{8}, Pairs: []float64{0.8}}},
	}
	md := r.Markdown(Meta{})
	tools, example, ok := strings.Cut(md, "## The documented RDMA path")
	if !ok || strings.Contains(tools, "example write") {
		t.Fatalf("no example section, or example rows in the tools section:\n%s", md)
	}
	for _, want := range []string{"| example write ib 4KiB qd1 | ops/s | 1 | 10.0 | 8.00 | 0.800 |", "median example/C", "-verify=false"} {
		if !strings.Contains(example, want) {
			t.Errorf("the example section lacks %q:\n%s", want, example)
		}
	}
	if txt := r.Text(); !strings.Contains(txt, "The documented RDMA path") || !strings.Contains(txt, "example write ib 4KiB qd1") {
		t.Errorf("Text lacks the example rows:\n%s", txt)
	}
}
