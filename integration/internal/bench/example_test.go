package bench_test

import (
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	"github.com/go-rds/rds/integration/internal/bench"
)

// The arguments of a worker role, shared by the Go workers and the C
// baseline.
func ExampleParseOptions() {
	o, err := bench.ParseOptions([]string{"bind=10.11.0.2:20000", "size=4096", "batch=32", "netns=/run/netns/rdspeer"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(o.Bind, o.Size, o.Batch, o.Dur)
	fmt.Println(o.Args())
	// Output:
	// 10.11.0.2:20000 4096 32 2s
	// [bind=10.11.0.2:20000 size=4096 batch=32 warm=0.5 dur=2 netns=/run/netns/rdspeer]
}

func ExampleParseResult() {
	r, ok := bench.ParseResult("RESULT msgs=120000 secs=2.000100 rate=59997.0 allocs=0")
	fmt.Println(ok, r["rate"], r["allocs"])
	// Output: true 59997 0
}

// A receiver in the peer namespace counting 64-byte messages for two
// seconds; it needs the rdsvm guest (or another kernel with RDS/TCP and
// that namespace).
func ExampleWorker() {
	args := []string{"bind=10.11.0.2:20000", "size=64", "dur=2", "netns=/run/netns/rdspeer"}
	if err := bench.Worker("recv", args, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// Running two workloads inside the rdsvm guest, with the C baseline built
// beside the Go binary, which serves as the Go worker through its "worker"
// subcommand (as integration/cmd/rdsbench does).
func ExampleRun() {
	self, _ := os.Executable()
	rep, err := bench.Run(&bench.Config{
		CBinary:   "testdata/rdsbench-c",
		GoBinary:  self,
		GoArgs:    []string{"worker"},
		Workloads: bench.Select(bench.DefaultWorkloads(), "tput loop 64B,rr loop"),
		Rounds:    3,
		Log:       os.Stderr,
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(rep.Text())
}

func ExampleSelect() {
	for _, w := range bench.Select(bench.DefaultWorkloads(), "rr ,rdma") {
		fmt.Println(w.Name)
	}
	// Output:
	// rr loop 64B
	// rr loop 64B spin
	// rr tcp 64B
	// rr tcp 64B spin
	// rdma write 16KiB qd1
	// rdma write 16KiB qd16
}

func ExampleMedian() {
	rounds := []float64{980, 1010, 1000, 700, 1005}
	fmt.Printf("median %.0f, spread %.0f%%\n", bench.Median(rounds), 100*bench.Spread(rounds))
	// Output: median 1000, spread 31%
}

func ExamplePercentile() {
	rtts := []int64{90, 95, 100, 100, 105, 110, 120, 130, 200, 900} // sorted
	fmt.Println(bench.Percentile(rtts, 0.50), bench.Percentile(rtts, 0.99))
	// Output: 110 900
}

func ExampleReport_Table() {
	rep := &bench.Report{Rows: []bench.Row{
		{Workload: "tput loop 64B", Metric: "msg/s", Goal: bench.GoalThroughput, C: []float64{1000, 1100}, Go: []float64{1000, 1000}},
		{Workload: "rr loop 64B", Metric: "p50 us", Goal: bench.GoalLatencyP50, C: []float64{100}, Go: []float64{105}},
	}}
	fmt.Print(rep.Table())
	// Output:
	// workload       unit    C median  Go median  Go/C   spread C  spread Go  target   result
	// tput loop 64B  msg/s   1050      1000       0.952  10%       0%         >= 0.95  met
	// rr loop 64B    p50 us  100       105        1.050  0%        0%         <= 1.10  met
}

func ExampleReport_Markdown() {
	rep := &bench.Report{Kernel: "6.1.0-56-amd64", Started: time.Now(), Rounds: 5}
	md := rep.Markdown(bench.Meta{Command: "go run ./integration/cmd/rdsbench", Machine: "2 CPUs"})
	title, _, _ := strings.Cut(md, "\n")
	fmt.Println(title)
	// Output: # Benchmarks: Go (this library) against a C baseline
}
