// Command rdsbench measures this library against a C program issuing the
// same system calls, side by side in one VM, and writes BENCHMARKS.md.
//
// From the repository root:
//
//	go run ./integration/cmd/rdsbench
//
// On the host it compiles the C baselines
// (integration/internal/bench/cbaseline/rdsbench.c, rdsstress.c and
// wakecode.c, with gcc -O2 -static; as root it installs gcc and libc6-dev
// when missing), builds itself, rdscat, examples/rdmawrite and rdsvm as
// static binaries, and boots the rdsvm VM (see TESTING.md) with the
// programs. Inside the VM it runs every workload of package bench several
// times, the C and the Go implementation alternately,
// then the tool workloads ("The tools as users run them": the rdscat binary
// against rdsstress-c, two processes each; "The documented RDMA path":
// examples/rdmawrite against rdsstress-c), prints the tables, and hands the
// results back to the host, which writes BENCHMARKS.md (never edit that file:
// run the command again). Every workload also reports the CPU time per
// message of each process. A last section ("What the VM charges for code")
// measures what a function call, and the same code inlined, costs the
// emulated CPU after a wake-up.
//
// A short trial of the tools section alone, written elsewhere:
//
//	go run ./integration/cmd/rdsbench -run tools -rounds 1 -extra 0 -long 0 -diag "" -o /tmp/tools.md
//
// Flags:
//
//	-kernel 6.1     guest kernel: 6.1, 6.12 or a linux-image-* package
//	-rounds 5       rounds per workload
//	-extra 4        more rounds for a workload whose spread (either side)
//	                exceeds 30% after them (0: never)
//	-warm 0.5s      warm-up before each measurement window
//	-window 2s      measurement window
//	-long 60s       the long receiver run for resident memory (0: skip)
//	-wake 5         rounds of "What the VM charges for code" (0: skip);
//	                with -run only when its words include "wake"
//	-run ""         only workloads whose name contains one of these comma-separated words;
//	                tool workloads match with "tools " in front of their name
//	                ("tools" selects them all, "tools rdma" rdscat's RDMA rows,
//	                "tools example" those of examples/rdmawrite)
//	-diag LIST      workloads to run again (3 rounds) with mixed C/Go
//	                pairings and a raw-syscall Go variant (default: tput loop
//	                64B, tput tcp 64KiB, rr tcp 64B; "" for none)
//	-v              show every worker's result lines
//	-o PATH         where to write the report (default BENCHMARKS.md at the
//	                repository root; with -run, only when -o is given)
//	-pgo PATH       profile every rdscat process of the tools rounds
//	                (rdscat stress -cpuprofile) and merge the profiles into
//	                PATH; the profiler's cost makes that run's numbers no
//	                benchmark
//	-perf DIR       run every process of the tools rounds, C and Go, under
//	                perf record inside the VM (perf from the host's
//	                linux-perf, installed as root when missing) and write
//	                each one's perf report into DIR: where the CPU time
//	                goes, kernel and user, function by function; like
//	                -pgo, for diagnosis, not a benchmark
//	-perfstat       with -perf: count instead of sampling (perf stat) each
//	                process's system calls by kind and its context switches;
//	                each round's line shows them per message sent, over the
//	                process's whole run, and DIR gets the raw counts
//	-perfswitch     with -perf: record each process's context switches
//	                instead of sampling it; each report lists them by the
//	                state of the thread that left the CPU (R: preempted)
//	                and the thread that got it: who preempts the tools
//	-ab BINARY      A/B mode: run this other rdscat build (static, as
//	                CGO_ENABLED=0 makes it: the VM has no shell or libc; say,
//	                one built from the previous commit) in the C baseline's place, so
//	                that the tools table compares it (A, in the C column)
//	                with this tree's rdscat (B) in the same run, alternating;
//	                needs -run with tool workloads only
//	-env-a, -env-b "NAME=VALUE ..."
//	                A/B mode: environment added to A's and B's rdscat
//	                processes; -env-a alone compares this tree's rdscat with
//	                itself under two environments (GOMAXPROCS, GODEBUG)
//
// A change to the library or to rdscat, against the previous commit, with
// the system calls and context switches of each side:
//
//	git worktree add /tmp/prev HEAD~1 && (cd /tmp/prev && CGO_ENABLED=0 go build -o /tmp/rdscat-prev ./cmd/rdscat)
//	go run ./integration/cmd/rdsbench -run "tools rr tcp 4x8 64B" -rounds 8 -extra 0 -long 0 -diag "" -ab /tmp/rdscat-prev -perf /tmp/counts -perfstat
//
// cmd/rdscat/default.pgo, the profile that every build of rdscat uses
// (profile-guided optimization), is regenerated with
//
//	go run ./integration/cmd/rdsbench -run tools -rounds 1 -extra 0 -long 0 -diag "" -pgo cmd/rdscat/default.pgo
//
// The same binary is the guest driver (rdsbench guest ...) and the Go
// worker (rdsbench worker ROLE key=value...).
package main

import (
	"bufio"
	"bytes"
	"debug/elf"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/go-rds/rds/integration/internal/bench"
	"github.com/go-rds/rds/integration/internal/repo"
)

const (
	profileLine   = "=== rdsbench profile" // followed by the file's name and its bytes in base64
	perfLine      = "=== rdsbench perf"    // the same for a perf report
	jsonBegin     = "=== rdsbench report json begin ==="
	jsonEnd       = "=== rdsbench report json end ==="
	cBinary       = "rdsbench-c"
	stressCBinary = "rdsstress-c"
	rdscatBinary  = "rdscat"
	exampleBinary = "rdmawrite" // examples/rdmawrite
	wakeCBinary   = "wakecode-c"
	abBinary      = "rdscat-a" // the -ab build in testdata
)

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "worker":
			if len(os.Args) < 3 {
				fatalf("usage: rdsbench worker ROLE key=value...")
			}
			if err := bench.Worker(os.Args[2], os.Args[3:], os.Stdout); err != nil {
				fatalf("worker %s: %v", os.Args[2], err)
			}
			return
		case "guest":
			os.Exit(guest(os.Args[2:]))
		}
	}
	os.Exit(host(os.Args[1:]))
}

func fatalf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "rdsbench: "+format+"\n", a...)
	os.Exit(1)
}

// runFlags are the flags the host passes on to the guest.
type runFlags struct {
	rounds       int
	extra        int
	warm, window time.Duration
	long         time.Duration
	wake         int
	run          string
	diag         string
	verbose      bool
	allocSites   bool
	profiles     bool
	perf         bool
	perfStat     bool
	perfSwitches bool
	ab           bool   // testdata holds rdscat-a (the host's -ab)
	envA, envB   string // NAME=VALUE ... for A's and B's processes
}

func (f *runFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&f.rounds, "rounds", 5, "rounds per workload (C and Go alternating)")
	fs.IntVar(&f.extra, "extra", 4, "more rounds for a workload whose spread on either side exceeds 30% after -rounds (0: never)")
	fs.DurationVar(&f.warm, "warm", 500*time.Millisecond, "warm-up before each measurement window")
	fs.DurationVar(&f.window, "window", 2*time.Second, "measurement window")
	fs.DurationVar(&f.long, "long", 60*time.Second, "window of the long receiver run for resident memory (0: skip)")
	fs.IntVar(&f.wake, "wake", 5, "rounds of \"What the VM charges for code\" (0: skip it); with -run only when its words include \"wake\"")
	fs.StringVar(&f.run, "run", "", "only workloads whose name contains one of these comma-separated words (tool workloads as \"tools NAME\": \"tools\" selects them all)")
	fs.StringVar(&f.diag, "diag", defaultDiag, "workloads (name words, comma-separated) to diagnose with mixed C/Go pairings and the raw-syscall Go variant; \"\" for none")
	fs.BoolVar(&f.verbose, "v", false, "show every worker's result lines")
	fs.BoolVar(&f.allocSites, "allocsites", false, "with -v: show the call sites of the Go workers' allocations in each window (slows them down)")
	fs.BoolVar(&f.profiles, "profiles", false, "guest: profile the rdscat processes and print the profiles (the host's -pgo sets it)")
	fs.BoolVar(&f.perf, "perfrecord", false, "guest: run the tools under perf (testdata/perf) and print the reports (the host's -perf sets it)")
	fs.BoolVar(&f.perfStat, "perfstat", false, "with -perf: count each tools process's system calls by kind and its context switches (perf stat) instead of sampling it; each round's line shows them per message, DIR gets the counts")
	fs.BoolVar(&f.perfSwitches, "perfswitch", false, "with -perf: record each tools process's context switches (the sched_switch tracepoint) instead of sampling it; the reports list them by the state of the thread that left the CPU (R: preempted) and the thread that got it")
	fs.BoolVar(&f.ab, "abguest", false, "guest: run testdata/"+abBinary+" in the C baseline's place (the host's -ab sets it)")
	fs.StringVar(&f.envA, "env-a", "", "A/B mode: `NAME=VALUE ...` (space-separated) added to the environment of A's rdscat processes; alone, it compares this tree's rdscat with itself under two environments")
	fs.StringVar(&f.envB, "env-b", "", "A/B mode: `NAME=VALUE ...` added to the environment of B's (this tree's) rdscat processes")
}

// wakeRounds is how many rounds "What the VM charges for code" runs: none
// in A/B mode, or when -run names workloads but not "wake".
func (f *runFlags) wakeRounds() int {
	if f.abMode() || f.run != "" && !slices.Contains(strings.Fields(strings.ReplaceAll(f.run, ",", " ")), "wake") {
		return 0
	}
	return max(f.wake, 0)
}

// abMode reports whether the tools rounds compare two rdscat builds or
// environments instead of C and rdscat.
func (f *runFlags) abMode() bool { return f.ab || f.envA != "" }

func (f *runFlags) args() []string {
	return []string{
		"-rounds", fmt.Sprint(f.rounds), "-extra", fmt.Sprint(f.extra), "-warm", f.warm.String(), "-window", f.window.String(),
		"-long", f.long.String(), "-wake", fmt.Sprint(f.wake), "-run", f.run, "-diag", f.diag, fmt.Sprintf("-v=%v", f.verbose), fmt.Sprintf("-allocsites=%v", f.allocSites), fmt.Sprintf("-profiles=%v", f.profiles), fmt.Sprintf("-perfrecord=%v", f.perf),
		fmt.Sprintf("-perfstat=%v", f.perfStat), fmt.Sprintf("-perfswitch=%v", f.perfSwitches), fmt.Sprintf("-abguest=%v", f.ab), "-env-a", f.envA, "-env-b", f.envB,
	}
}

// guest runs inside the VM: the driver.
func guest(args []string) int {
	fs := flag.NewFlagSet("rdsbench guest", flag.ContinueOnError)
	var f runFlags
	f.register(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "rdsbench:", err)
		return 1
	}
	var bins [5]string
	for i, name := range []string{cBinary, stressCBinary, rdscatBinary, exampleBinary, wakeCBinary} {
		if bins[i], err = filepath.Abs(filepath.Join("testdata", name)); err != nil {
			fmt.Fprintln(os.Stderr, "rdsbench:", err)
			return 1
		}
	}
	ws := bench.Select(bench.DefaultWorkloads(), f.run)
	tools := bench.SelectTools(toolWorkloads(&f), f.run)
	wake := f.wakeRounds()
	if len(ws) == 0 && len(tools) == 0 && wake == 0 {
		fmt.Fprintf(os.Stderr, "rdsbench: no workload matches -run %q\n", f.run)
		return 2
	}
	abBin := ""
	if f.abMode() {
		if len(ws) > 0 || len(tools) == 0 {
			fmt.Fprintf(os.Stderr, "rdsbench: A/B mode compares rdscat builds in the tools rounds: -run %q must select tool workloads only\n", f.run)
			return 2
		}
		if f.ab {
			if abBin, err = filepath.Abs(filepath.Join("testdata", abBinary)); err != nil {
				fmt.Fprintln(os.Stderr, "rdsbench:", err)
				return 1
			}
		}
		a := "this tree's rdscat"
		if f.ab {
			a = "the -ab build"
		}
		fmt.Printf("A/B mode: the C column is A (%s, environment %q), the rdscat column is B (this tree's rdscat, environment %q)\n", a, f.envA, f.envB)
	}
	profDir := ""
	if f.profiles {
		if profDir, err = os.MkdirTemp("", "rdsbench-profiles-"); err != nil {
			fmt.Fprintln(os.Stderr, "rdsbench:", err)
			return 1
		}
	}
	perfTool, perfDir := "", ""
	if f.perf {
		if perfTool, err = filepath.Abs(filepath.Join("testdata", "perf")); err == nil {
			perfDir, err = os.MkdirTemp("", "rdsbench-perf-")
		}
		if err == nil && (f.perfStat || f.perfSwitches) {
			err = mountTracefs()
		}
		if err == nil && (f.perfStat || f.perfSwitches) {
			events := bench.StatEvents()
			if f.perfSwitches {
				events = bench.SwitchEvent
			}
			var stop func()
			if stop, err = bench.HoldTracepoints(perfTool, events); err == nil {
				defer stop()
			}
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "rdsbench:", err)
			return 1
		}
	}
	rep, err := bench.Run(&bench.Config{
		CBinary: bins[0], GoBinary: self, GoArgs: []string{"worker"},
		Tools: tools, StressC: bins[1], Rdscat: bins[2], Example: bins[3], ProfileDir: profDir, Perf: perfTool, PerfDir: perfDir, PerfStat: f.perfStat, PerfSwitches: f.perfSwitches,
		ABRdscat: abBin, EnvA: strings.Fields(f.envA), EnvB: strings.Fields(f.envB),
		Workloads: ws, Diagnose: diagnose(f.diag), Rounds: f.rounds, ExtraRounds: extraRounds(f.extra), Warm: f.warm, Window: f.window, LongRun: f.long,
		WakeRounds: wake, WakeC: bins[4],
		Log: os.Stdout, Verbose: f.verbose, AllocSites: f.allocSites,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "rdsbench:", err)
		return 1
	}
	fmt.Println()
	fmt.Print(rep.Text())
	js, err := json.Marshal(rep)
	if err != nil {
		fmt.Fprintln(os.Stderr, "rdsbench:", err)
		return 1
	}
	fmt.Println(jsonBegin)
	fmt.Println(string(js))
	fmt.Println(jsonEnd)
	if profDir != "" {
		if err := printFiles(os.Stdout, profDir, profileLine, ".pprof"); err != nil {
			fmt.Fprintln(os.Stderr, "rdsbench:", err)
			return 1
		}
	}
	if perfDir != "" && f.perfStat {
		if err := printFiles(os.Stdout, perfDir, perfLine, ".stat"); err != nil {
			fmt.Fprintln(os.Stderr, "rdsbench:", err)
			return 1
		}
	} else if perfDir != "" {
		if err := perfReports(perfTool, perfDir, f.perfSwitches); err != nil {
			fmt.Fprintln(os.Stderr, "rdsbench:", err)
			return 1
		}
		if err := printFiles(os.Stdout, perfDir, perfLine, ".txt"); err != nil {
			fmt.Fprintln(os.Stderr, "rdsbench:", err)
			return 1
		}
	}
	return 0
}

// perfReports writes, next to each perf.data file of dir, its report
// (NAME.txt): the share of each binary, then of each function; for
// recorded context switches (switches), their share by who got the CPU.
func perfReports(tool, dir string, switches bool) error {
	datas, err := filepath.Glob(filepath.Join(dir, "*.data"))
	if err != nil {
		return err
	}
	for _, data := range datas {
		var report []byte
		sorts := []string{"dso", "dso,sym"}
		if switches {
			sorts = []string{bench.SwitchSort}
		}
		for _, sort := range sorts {
			bin, args := bench.PerfReport(tool, data, sort)
			out, err := exec.Command(bin, args...).CombinedOutput()
			if err != nil {
				return fmt.Errorf("perf report %s: %v: %s", filepath.Base(data), err, out)
			}
			report = append(report, perfTrim(out)...)
		}
		if err := os.WriteFile(strings.TrimSuffix(data, ".data")+".txt", report, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// perfTrim keeps a perf report's rows and its sample counts, and drops the
// rest of its comment lines, its blank lines and the column rules.
func perfTrim(report []byte) []byte {
	var out []byte
	for _, line := range strings.Split(string(report), "\n") {
		keep := strings.TrimSpace(line) != "" && !strings.HasPrefix(line, "#")
		if strings.HasPrefix(line, "# Samples") || strings.HasPrefix(line, "# Event count") {
			keep = true
		}
		if keep {
			out = append(out, strings.TrimRight(line, " ")...)
			out = append(out, '\n')
		}
	}
	return out
}

// printFiles prints every file of dir whose name ends in suffix as one
// line: prefix, the file's name and its bytes in base64.
func printFiles(w io.Writer, dir, prefix, suffix string) error {
	names, err := filepath.Glob(filepath.Join(dir, "*"+suffix))
	if err != nil {
		return err
	}
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%s %s %s\n", prefix, filepath.Base(name), base64.StdEncoding.EncodeToString(b))
	}
	return nil
}

// extractFiles writes the files the guest printed with printFiles (prefix,
// names ending in suffix) into dir and returns their paths.
func extractFiles(out []byte, dir, prefix, suffix string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var paths []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(strings.TrimRight(sc.Text(), "\r"), prefix+" ")
		if !ok {
			continue
		}
		name, data, ok := strings.Cut(rest, " ")
		if !ok || name != filepath.Base(name) || !strings.HasSuffix(name, suffix) {
			return nil, fmt.Errorf("a malformed line from the guest: %.80q", rest)
		}
		b, err := base64.StdEncoding.DecodeString(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return nil, err
		}
		paths = append(paths, p)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, errors.New("the guest printed none (did -run select tool workloads?)")
	}
	return paths, nil
}

// shipPerf copies the host's perf, the shared libraries it links and
// their loader (as ld.so) into dir, for bench.PerfRecord in the VM. As
// root it installs linux-perf when perf is missing.
func shipPerf(dir string) error {
	bin, err := exec.LookPath("perf")
	if err != nil && os.Geteuid() == 0 {
		if err = aptInstall("linux-perf"); err == nil {
			bin, err = exec.LookPath("perf")
		}
	}
	if err != nil {
		return fmt.Errorf("-perf needs perf on the host (apt-get install linux-perf): %w", err)
	}
	ef, err := elf.Open(bin)
	if err != nil {
		return fmt.Errorf("-perf: %s is not a program perf can be shipped as: %w", bin, err)
	}
	interp := ""
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP {
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err == nil {
				interp = strings.TrimRight(string(b), "\x00")
			}
		}
	}
	ef.Close()
	if interp == "" {
		return fmt.Errorf("-perf: %s names no loader (a static perf needs none: not supported)", bin)
	}
	out, err := exec.Command("ldd", bin).Output()
	if err != nil {
		return fmt.Errorf("-perf: ldd %s: %w", bin, err)
	}
	files := map[string]string{filepath.Join(dir, "perf"): bin, filepath.Join(dir, "ld.so"): interp}
	for _, lib := range lddPaths(string(out)) {
		files[filepath.Join(dir, filepath.Base(lib))] = lib
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for to, from := range files {
		b, err := os.ReadFile(from)
		if err == nil {
			err = os.WriteFile(to, b, 0o755)
		}
		if err != nil {
			return fmt.Errorf("-perf: %w", err)
		}
	}
	return nil
}

// lddPaths returns the libraries that ldd's output resolves ("name =>
// /path (address)").
func lddPaths(out string) []string {
	var paths []string
	for _, line := range strings.Split(out, "\n") {
		_, rest, ok := strings.Cut(line, "=> ")
		if !ok {
			continue
		}
		if p, _, _ := strings.Cut(strings.TrimSpace(rest), " "); strings.HasPrefix(p, "/") {
			paths = append(paths, p)
		}
	}
	return paths
}

// mergeProfiles merges the pprof files into one (go tool pprof -proto)
// written to out.
func mergeProfiles(root string, paths []string, out string) error {
	cmd := exec.Command("go", append([]string{"tool", "pprof", "-proto"}, paths...)...)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("go tool pprof -proto: %v: %s", err, stderr.Bytes())
	}
	return os.WriteFile(out, b, 0o644)
}

// extraRounds maps the -extra flag to Config.ExtraRounds, where 0 means
// the default.
func extraRounds(n int) int {
	if n <= 0 {
		return -1
	}
	return n
}

// defaultDiag names the workloads diagnosed by default.
const defaultDiag = "tput loop 64B,tput tcp 64KiB,rr tcp 64B"

// diagnose returns the workloads named exactly by the comma-separated
// list.
func diagnose(list string) []bench.Workload {
	var out []bench.Workload
	for _, name := range strings.Split(list, ",") {
		for _, w := range bench.DefaultWorkloads() {
			if w.Name == strings.TrimSpace(name) {
				out = append(out, w)
			}
		}
	}
	return out
}

// host builds everything, runs the VM and writes the report.
func host(args []string) int {
	fs := flag.NewFlagSet("rdsbench", flag.ContinueOnError)
	var f runFlags
	f.register(fs)
	kernel := fs.String("kernel", "6.1", "guest kernel: 6.1, 6.12 or a linux-image-* package name")
	out := fs.String("o", "", "report file (default BENCHMARKS.md at the repository root; with -run only when given)")
	pgo := fs.String("pgo", "", "profile the rdscat processes of the tools rounds and merge the profiles into `PATH` (the run's numbers are no benchmark then)")
	perfOut := fs.String("perf", "", "run the tools rounds' processes under perf record in the VM and write their reports into `DIR` (the run's numbers are no benchmark then)")
	ab := fs.String("ab", "", "A/B mode: run this other rdscat `BINARY` (for example one built from another revision) in the C baseline's place in the tools rounds, so that the table compares it (A, in the C column) with this tree's rdscat (B) in the same run; needs -run with tool workloads only")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	f.ab = *ab != ""
	if f.perfStat && *perfOut == "" {
		fmt.Fprintln(os.Stderr, "rdsbench: -perfstat counts under perf: give -perf DIR too")
		return 2
	}
	if f.perfSwitches && (*perfOut == "" || f.perfStat) {
		fmt.Fprintln(os.Stderr, "rdsbench: -perfswitch records under perf: give -perf DIR too, and not -perfstat")
		return 2
	}
	if f.abMode() && f.run == "" {
		fmt.Fprintln(os.Stderr, "rdsbench: A/B mode (-ab, -env-a) needs -run with tool workloads (it must not write BENCHMARKS.md)")
		return 2
	}
	if (*pgo != "" || *perfOut != "") && *out == "" && f.run == "" {
		fmt.Fprintln(os.Stderr, "rdsbench: -pgo or -perf with the whole benchmark would write BENCHMARKS.md from profiled runs: give -run tools (and -o elsewhere if you want the tables)")
		return 2
	}
	f.profiles = *pgo != ""
	f.perf = *perfOut != ""
	root, err := repo.Root("rdsbench")
	if err != nil {
		fmt.Fprintln(os.Stderr, "rdsbench:", err)
		return 1
	}
	if *out == "" && f.run == "" {
		*out = filepath.Join(root, "BENCHMARKS.md")
	}
	work, err := os.MkdirTemp("", "rdsbench-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "rdsbench:", err)
		return 1
	}
	defer os.RemoveAll(work)
	if err := os.Mkdir(filepath.Join(work, "testdata"), 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "rdsbench:", err)
		return 1
	}
	ccVersion, err := buildC(root, map[string]string{"rdsbench.c": cBinary, "rdsstress.c": stressCBinary, "wakecode.c": wakeCBinary}, filepath.Join(work, "testdata"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "rdsbench:", err)
		return 1
	}
	if f.perf {
		if err := shipPerf(filepath.Join(work, "testdata", "perf")); err != nil {
			fmt.Fprintln(os.Stderr, "rdsbench:", err)
			return 1
		}
	}
	self := filepath.Join(work, "rdsbench")
	vm := filepath.Join(work, "rdsvm")
	for _, b := range []struct{ out, pkg string }{
		{self, "./integration/cmd/rdsbench"}, {vm, "./integration/cmd/rdsvm"}, {filepath.Join(work, "testdata", rdscatBinary), "./cmd/rdscat"},
		{filepath.Join(work, "testdata", exampleBinary), "./examples/rdmawrite"},
	} {
		logf("building %s", b.pkg)
		cmd := exec.Command("go", "build", "-o", b.out, b.pkg)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "rdsbench: go build %s: %v\n", b.pkg, err)
			return 1
		}
	}

	if *ab != "" {
		if err := copyFile(*ab, filepath.Join(work, "testdata", abBinary)); err != nil {
			fmt.Fprintln(os.Stderr, "rdsbench: -ab:", err)
			return 1
		}
	}
	nw := len(bench.Select(bench.DefaultWorkloads(), f.run))
	nt := len(bench.SelectTools(toolWorkloads(&f), f.run))
	runs := nw*f.rounds*2 + len(diagnose(f.diag))*3*5
	// A round of the wake-up code measurement took about 20 s in the VM.
	estimate := time.Duration(runs)*(f.warm+f.window+time.Second) + f.long + time.Duration(f.wakeRounds())*30*time.Second +
		time.Duration(nt*f.rounds*2)*(f.warm+f.window+bench.ToolSetupSlack+2*time.Second)
	cmd := exec.Command(vm, append([]string{self, "guest"}, f.args()...)...)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "RDSVM_KERNEL="+*kernel)
	if os.Getenv("RDSVM_TIMEOUT") == "" {
		cmd.Env = append(cmd.Env, "RDSVM_TIMEOUT="+(2*estimate+5*time.Minute).String())
	}
	var captured bytes.Buffer
	cmd.Stdout = io.MultiWriter(os.Stdout, &captured)
	cmd.Stderr = os.Stderr
	logf("running the benchmark in the VM (kernel %s, %d workloads and %d tool workloads, about %v)", *kernel, nw, nt, estimate.Round(time.Minute))
	loadBefore := loadAvg()
	runErr := cmd.Run()
	load := loadBefore + " before, " + loadAvg() + " after"
	rep, perr := extractReport(captured.Bytes())
	if runErr != nil {
		fmt.Fprintf(os.Stderr, "rdsbench: the VM run failed: %v\n", runErr)
		return 1
	}
	if perr != nil {
		fmt.Fprintln(os.Stderr, "rdsbench:", perr)
		return 1
	}
	if *pgo != "" {
		dir := filepath.Join(work, "profiles")
		paths, err := extractFiles(captured.Bytes(), dir, profileLine, ".pprof")
		if err == nil {
			err = mergeProfiles(root, paths, *pgo)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "rdsbench:", err)
			return 1
		}
		logf("merged %d profiles into %s", len(paths), *pgo)
	}
	if *perfOut != "" {
		suffix := ".txt"
		if f.perfStat {
			suffix = ".stat"
		}
		paths, err := extractFiles(captured.Bytes(), *perfOut, perfLine, suffix)
		if err != nil {
			fmt.Fprintln(os.Stderr, "rdsbench:", err)
			return 1
		}
		logf("wrote %d perf reports into %s", len(paths), *perfOut)
	}
	if *out != "" {
		meta := bench.Meta{
			Command: reproduce(&f, *kernel),
			Machine: machine(),
			Host:    hostKernel(),
			QEMU:    firstLine("qemu-system-x86_64", "--version"),
			Go:      runtime.Version(),
			CC:      ccVersion,
			Load:    load,
		}
		if err := os.WriteFile(*out, []byte(rep.Markdown(meta)), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "rdsbench:", err)
			return 1
		}
		logf("wrote %s", *out)
	}
	for _, row := range slices.Concat(rep.Rows, rep.ToolRows, rep.ExampleRows) {
		if row.Verdict() == "failed" {
			return 1
		}
	}
	if len(rep.Failures) > 0 {
		return 1
	}
	return 0
}

// toolWorkloads returns the tools rows and, except in A/B mode (which
// compares rdscat builds, and the example rows run no rdscat), the rows of
// the documented RDMA path.
func toolWorkloads(f *runFlags) []bench.ToolWorkload {
	ws := bench.ToolWorkloads()
	if !f.abMode() {
		ws = append(ws, bench.ExampleWorkloads()...)
	}
	return ws
}

func logf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "rdsbench: "+format+"\n", a...)
}

// buildC compiles the C programs of integration/internal/bench/cbaseline
// (source file name to binary name) statically into dir and returns the
// compiler's version line.
func buildC(root string, progs map[string]string, dir string) (string, error) {
	if _, err := exec.LookPath("gcc"); err != nil || !haveStaticLibc() {
		if os.Geteuid() != 0 {
			return "", errors.New("the C baseline needs gcc and a static libc: apt-get install gcc libc6-dev")
		}
		if err := aptInstall("gcc", "libc6-dev"); err != nil {
			return "", err
		}
	}
	for src, bin := range progs {
		src = filepath.Join(root, "integration", "internal", "bench", "cbaseline", src)
		logf("compiling %s", src)
		cmd := exec.Command("gcc", "-O2", "-static", "-Wall", "-o", filepath.Join(dir, bin), src)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("gcc %s: %w", src, err)
		}
	}
	return firstLine("gcc", "--version"), nil
}

// aptInstall installs Debian packages (as root): the package lists first,
// then the packages without their recommendations.
func aptInstall(pkgs ...string) error {
	logf("installing %s", strings.Join(pkgs, " "))
	for _, args := range [][]string{{"update"}, append([]string{"install", "-y", "--no-install-recommends"}, pkgs...)} {
		cmd := exec.Command("apt-get", args...)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("apt-get %s: %w", strings.Join(args, " "), err)
		}
	}
	return nil
}

func haveStaticLibc() bool {
	out, err := exec.Command("gcc", "-print-file-name=libc.a").Output()
	if err != nil {
		return false
	}
	p := strings.TrimSpace(string(out))
	_, err = os.Stat(p)
	return filepath.IsAbs(p) && err == nil
}

// extractReport finds the JSON report the guest printed between markers.
func extractReport(out []byte) (*bench.Report, error) {
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	in := false
	var js []byte
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		switch {
		case line == jsonBegin:
			in, js = true, nil
		case line == jsonEnd:
			var rep bench.Report
			if err := json.Unmarshal(js, &rep); err != nil {
				return nil, fmt.Errorf("the guest's report: %w", err)
			}
			return &rep, nil
		case in:
			js = append(js, line...)
		}
	}
	return nil, errors.New("the guest printed no report")
}

func reproduce(f *runFlags, kernel string) string {
	s := "go run ./integration/cmd/rdsbench"
	if kernel != "6.1" {
		s += " -kernel " + kernel
	}
	if f.rounds != 5 {
		s += fmt.Sprintf(" -rounds %d", f.rounds)
	}
	if f.warm != 500*time.Millisecond {
		s += " -warm " + f.warm.String()
	}
	if f.window != 2*time.Second {
		s += " -window " + f.window.String()
	}
	if f.long != 60*time.Second {
		s += " -long " + f.long.String()
	}
	if f.run != "" {
		s += fmt.Sprintf(" -run %q", f.run)
	}
	if f.diag != defaultDiag {
		s += fmt.Sprintf(" -diag %q", f.diag)
	}
	if f.wake != 5 {
		s += fmt.Sprintf(" -wake %d", f.wake)
	}
	return s
}

func machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	return fmt.Sprintf("%s, %d host CPUs, %s/%s", model, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH)
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func hostKernel() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func firstLine(name string, args ...string) string {
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		return name + " (version unknown)"
	}
	line, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(line)
}

// copyFile copies the executable src to dst.
func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o755)
}
