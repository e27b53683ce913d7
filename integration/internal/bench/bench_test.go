package bench

import (
	"math"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestOptionsRoundTrip(t *testing.T) {
	want := &Options{
		Bind: netip.MustParseAddrPort("10.11.0.2:20002"), Peer: netip.MustParseAddrPort("10.11.0.1:20003"),
		Size: 4096, Batch: 32, Depth: 16, Warm: 250 * time.Millisecond, Dur: 3 * time.Second,
		NetNS: "/run/netns/rdspeer", TS: true, Spin: 200 * time.Microsecond, Procs: 1, Raw: 2, AllocSites: true,
	}
	got, err := ParseOptions(want.Args())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ParseOptions(Args()) = %+v, want %+v", got, want)
	}
}

func TestParseOptionsDefaultsAndErrors(t *testing.T) {
	o, err := ParseOptions([]string{"bind=127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	if o.Size != 64 || o.Batch != 1 || o.Depth != 1 || o.Warm != 500*time.Millisecond || o.Dur != 2*time.Second {
		t.Fatalf("defaults %+v", o)
	}
	for _, bad := range [][]string{
		nil,                                 // no bind
		{"bind=127.0.0.1:1", "size"},        // not key=value
		{"bind=127.0.0.1:1", "colour=blue"}, // unknown key
		{"bind=nowhere"},                    // bad address
		{"bind=127.0.0.1:1", "batch=0"},     // batch < 1
		{"bind=127.0.0.1:1", "procs=-1"},    // procs < 0
		{"bind=127.0.0.1:1", "warm=soon"},   // not seconds
	} {
		if _, err := ParseOptions(bad); err == nil {
			t.Errorf("ParseOptions(%q) succeeded", bad)
		}
	}
}

func TestParseResult(t *testing.T) {
	r, ok := ParseResult("RESULT msgs=10 rate=2.5 p50_ns=1200\r")
	if !ok || r["msgs"] != 10 || r["rate"] != 2.5 || r["p50_ns"] != 1200 {
		t.Fatalf("ParseResult = %v, %v", r, ok)
	}
	for _, line := range []string{"READY", "RESULT msgs", "RESULT msgs=ten", "rdsbench: RESULT msgs=1"} {
		if _, ok := ParseResult(line); ok {
			t.Errorf("ParseResult(%q) accepted", line)
		}
	}
}

func TestStats(t *testing.T) {
	if m := Median([]float64{5, 1, 3}); m != 3 {
		t.Errorf("Median odd = %v", m)
	}
	if m := Median([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Errorf("Median even = %v", m)
	}
	xs := []float64{90, 100, 110}
	if s := Spread(xs); math.Abs(s-0.2) > 1e-12 {
		t.Errorf("Spread = %v, want 0.2", s)
	}
	if !reflect.DeepEqual(xs, []float64{90, 100, 110}) {
		t.Errorf("Median/Spread modified their input: %v", xs)
	}
	if Spread([]float64{7}) != 0 || Median(nil) != 0 {
		t.Error("degenerate Spread/Median not 0")
	}
	sorted := []int64{10, 20, 30, 40, 50, 60, 70, 80, 90, 100}
	if p := Percentile(sorted, 0.5); p != 60 {
		t.Errorf("p50 = %d, want 60 (nearest rank)", p)
	}
	if p := Percentile(sorted, 0.99); p != 100 {
		t.Errorf("p99 = %d", p)
	}
	if p := Percentile([]int64(nil), 0.5); p != 0 {
		t.Errorf("p50 of nothing = %d", p)
	}
}

func TestVerdicts(t *testing.T) {
	for _, tc := range []struct {
		row  Row
		want string
	}{
		{Row{Goal: GoalThroughput, C: []float64{100}, Go: []float64{96}}, "met"},
		{Row{Goal: GoalThroughput, C: []float64{100}, Go: []float64{94}}, "missed"},
		{Row{Goal: GoalBatchThroughput, C: []float64{100}, Go: []float64{99}}, "missed"},
		{Row{Goal: GoalLatencyP50, C: []float64{100}, Go: []float64{109}}, "met"},
		{Row{Goal: GoalLatencyP50, C: []float64{100}, Go: []float64{111}}, "missed"},
		{Row{C: []float64{100}, Go: []float64{300}}, "-"},
		{Row{Goal: GoalRDMA, C: []float64{100}}, "failed"},
	} {
		if got := tc.row.Verdict(); got != tc.want {
			t.Errorf("Verdict(%+v) = %s, want %s", tc.row, got, tc.want)
		}
	}
	if !(Alloc{Allocs: 5, Msgs: 100000}).Met() || (Alloc{Allocs: 100, Msgs: 100}).Met() || (Alloc{}).Met() {
		t.Error("Alloc.Met")
	}
	if !(RSS{StartKiB: 1000, EndKiB: 1050}).Flat() || (RSS{StartKiB: 1000, EndKiB: 1051}).Flat() || (RSS{EndKiB: 5}).Flat() {
		t.Error("RSS.Flat")
	}
	if !(RSS{StartKiB: 1000, At10s: 1040, EndKiB: 1045}).Flat() || (RSS{StartKiB: 1000, At10s: 1010, EndKiB: 1030}).Flat() {
		t.Error("RSS.Flat with the ten-second sample")
	}
}

func TestDefaultWorkloads(t *testing.T) {
	ws := DefaultWorkloads()
	names := map[string]bool{}
	var tput, batch, rr, rdma int
	for _, w := range ws {
		if names[w.Name] {
			t.Errorf("duplicate workload %q", w.Name)
		}
		names[w.Name] = true
		switch {
		case w.Kind == Throughput && w.Batch > 1:
			batch++
		case w.Kind == Throughput:
			tput++
		case w.Kind == Latency:
			rr++
			if strings.HasSuffix(w.Name, " spin") != (w.Spin > 0) {
				t.Errorf("%s: spin %v", w.Name, w.Spin)
			}
		case w.Kind == RDMA:
			rdma++
			if w.Size > 16<<10 || w.Path != PathIB {
				t.Errorf("%s: %d bytes over %s", w.Name, w.Size, w.Path)
			}
		}
	}
	if tput != 6 || batch != 6 || rr != 4 || rdma != 2 {
		t.Fatalf("%d throughput, %d batch, %d latency, %d RDMA workloads; want 6, 6, 4, 2", tput, batch, rr, rdma)
	}
	for _, n := range []string{"tput loop 64B", "tput tcp 64KiB batch32", "rr tcp 64B", "rdma write 16KiB qd16"} {
		if !names[n] {
			t.Errorf("no workload %q", n)
		}
	}
	if got := Select(ws, "rr ,qd16"); len(got) != 5 {
		t.Errorf("Select = %v", got)
	}
	if got := Select(ws, " "); len(got) != len(ws) {
		t.Errorf("empty filter selected %d of %d", len(got), len(ws))
	}
}

func TestRowNoisy(t *testing.T) {
	for _, tc := range []struct {
		c, g []float64
		want bool
	}{
		{[]float64{100, 110, 105}, []float64{90, 95, 100}, false},
		{[]float64{100, 140, 105}, []float64{90, 95, 100}, true}, // C spreads 38%
		{[]float64{100, 110, 105}, []float64{60, 95, 100}, true}, // Go spreads 42%
		{[]float64{100}, []float64{10}, false},                   // one value has no spread
	} {
		row := Row{C: tc.c, Go: tc.g}
		if got := row.noisy(0.3); got != tc.want {
			t.Errorf("noisy(C %v, Go %v) = %v, want %v", tc.c, tc.g, got, tc.want)
		}
	}
}

func TestReportRendering(t *testing.T) {
	rep := &Report{
		Kernel: "6.1.0-test", Rounds: 2, Warm: time.Second, Window: 2 * time.Second, ExtraRounds: 4, NoisySpread: 0.3,
		Rows: []Row{
			{Workload: "tput loop 64B", Metric: "msg/s", Goal: GoalThroughput, C: []float64{100, 110}, Go: []float64{90, 100}},
			{Workload: "tput loop 64B", Metric: CPULabel("receiver"), Goal: GoalCPU, C: []float64{10}, Go: []float64{11}},
			{Workload: "tput loop 64B batch32", Metric: "msg/s", Goal: GoalBatchThroughput, C: []float64{150}, Go: []float64{160}},
			{Workload: "tput loop 64B batch32", Metric: CPULabel("receiver"), Goal: GoalCPU, C: []float64{8}, Go: []float64{9}},
		},
		Allocs:    []Alloc{{Workload: "tput loop 64B", Side: "receiver", What: "ReadMsg", Allocs: 3, Msgs: 1000}},
		RSS:       []RSS{{Impl: "Go", Workload: "long", Seconds: 60, StartKiB: 3000, EndKiB: 3010, MaxKiB: 3020}},
		Diagnoses: []Diagnosis{{Workload: "tput loop 64B", Metric: "msg/s", Pairings: []string{"C", "Go"}, Values: [][]float64{{100}, {50}}}},
		Failures:  []string{"something broke"},
	}
	text := rep.Text()
	for _, want := range []string{"0.905", "missed", "1.067", "met", "something broke", "0.500"} {
		if !strings.Contains(text, want) {
			t.Errorf("Text lacks %q:\n%s", want, text)
		}
	}
	md := rep.Markdown(Meta{Command: "go run ./integration/cmd/rdsbench", Machine: "test CPU", Load: "1 2 3 before"})
	// One batching line per batch workload, from the message rates only.
	if n := strings.Count(md, "| tput loop 64B | 1.429 |"); n != 1 || strings.Contains(md, "| tput loop 64B | 0.") {
		t.Errorf("the batching table pairs rows other than the message rates:\n%s", md)
	}
	for _, want := range []string{"Do not edit", "go run ./integration/cmd/rdsbench", "| tput loop 64B | msg/s | 2 | 105 | 95.0 | 0.905 |", "| tput loop 64B batch32 | msg/s | 1 | 150 |", "| tput loop 64B | 1.429 | 1.524 | 1.684 |", "1 2 3 before", "6.1.0-test", "4 more where the spread of either side exceeded 30%"} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md)
		}
	}
}
