//go:build linux

// Command rdstest is the project's single test command. From the repository
// root:
//
//	go run ./integration/cmd/rdstest
//
// It installs missing host packages (as root), runs go vet, the gofmt check
// and the unit tests, builds the rdsvm VM runner, checks the runner itself
// (exit codes, a missing module, a hang, a kernel panic), and then runs every
// package with integration-tagged tests inside VMs, once per kernel. Its last
// line is the overall tally, "N passed, M failed", and it exits non-zero on
// any failure.
//
// See TESTING.md (repository root).
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/go-rds/rds/integration/internal/kernel"
	"github.com/go-rds/rds/integration/internal/repo"
)

var (
	flagKernels = flag.String("kernels", envOr("RDSTEST_KERNELS", strings.Join(kernel.Aliases(), ",")),
		"comma-separated kernels to test: 6.1, 6.12, sid (Debian unstable's newest) or linux-image-* package names (env RDSTEST_KERNELS)")
	flagRun      = flag.String("run", "", "passed to go test -run for the integration tests")
	flagShort    = flag.Bool("short-circuit", false, "stop at the first failing stage")
	flagUnit     = flag.Bool("unit", true, "run go vet, the gofmt check and the unit tests on the host")
	flagSelf     = flag.Bool("selftest", true, "check the rdsvm runner itself (negative cases)")
	flagVerbose  = flag.Bool("v", false, "print the full output of passing tests too")
	flagParallel = flag.Int("p", 2, "integration test packages run in parallel (each boots one or two VMs)")
	flagRace     = flag.Bool("race", true, "also run the host unit tests with -race, and build the -race-pkgs integration packages with -race")
	flagRaceRun  = flag.String("race-run", "^(TestIntegrationLateTransferQuarantine|TestIntegrationGetMRRefused|TestIntegrationBarrierMark|TestIntegrationRDMAWriteRead|TestIntegrationBlockServer|TestBlockServer.*)$",
		"tests of package integration (RDMA, barrier, block server) run a second time built with -race; empty: none")
	flagRacePkgs = flag.String("race-pkgs", "./integration/rdmafaults,./integration/rdmaatomics,./integration/twovmrdma,./integration/twovmhostile",
		"integration packages whose VM tests run built with -race (with -race); packages whose rdsvm.json says \"race\": true always do")
	flagCross   = flag.Bool("cross", true, "with -unit: go build and go vet ./... for every cross-build target, and go mod tidy -diff")
	flagResults = flag.String("results", os.Getenv("RDSTEST_RESULTS"),
		"write every test result to this file as JSON lines (default <cache>/results/rdstest.jsonl; env RDSTEST_RESULTS)")
)

// defaultKernelList reports whether the kernels to test are the default
// ones: neither -kernels nor RDSTEST_KERNELS chose them.
func defaultKernelList() bool {
	set := os.Getenv("RDSTEST_KERNELS") != ""
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "kernels" })
	return !set
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// tally counts test results.
type tally struct{ passed, failed, skipped int }

func (t *tally) add(o tally) { t.passed += o.passed; t.failed += o.failed; t.skipped += o.skipped }

func (t tally) String() string {
	s := fmt.Sprintf("%d passed, %d failed", t.passed, t.failed)
	if t.skipped > 0 {
		s += fmt.Sprintf(", %d skipped", t.skipped)
	}
	return s
}

var (
	total   tally
	summary []string
	// rdsvmPath is the built VM runner, go test's -exec.
	rdsvmPath string
	// collectMu guards what concurrent go test runs add to: bootLines
	// (per kernel), reliabilityRows and deviationRows.
	collectMu sync.Mutex
	bootLines = map[string][]string{}
	// results records every counted outcome; see results.go.
	results = newResultsLog(nil, "")
)

// fail counts one failure that is not a test (a check, a stage) and
// records it in the results file.
func fail(kernel, what string) {
	total.failed++
	results.record(result{Kernel: kernel, Package: "check", Test: what, Outcome: "fail"})
}

func note(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	summary = append(summary, line)
	fmt.Printf("rdstest: %s\n", line)
}

func stage(name string) { fmt.Printf("\n==== rdstest: %s ====\n", name) }

func main() {
	flag.Parse()
	start := time.Now()
	err := openResults()
	if err == nil {
		err = run()
	}
	if err != nil {
		fmt.Printf("rdstest: %v\n", err)
		fail("", "rdstest: "+firstLine(err.Error()))
	}
	printReliability()
	summary = append(summary, deviationSummary(deviationRows)...)
	fmt.Printf("\n==== rdstest summary (%s) ====\n", time.Since(start).Round(time.Second))
	for _, s := range summary {
		fmt.Println(s)
	}
	if results.path != "" {
		if results.err != nil {
			fmt.Printf("results file %s: FAILED to write: %v\n", results.path, results.err)
		} else {
			fmt.Printf("results of every test (JSON lines): %s\n", results.path)
		}
	}
	// The last line is the tally alone; CI parses it.
	fmt.Println(tally{passed: total.passed, failed: total.failed, skipped: total.skipped}.String())
	if total.failed > 0 || err != nil {
		os.Exit(1)
	}
	if total.passed == 0 {
		os.Exit(1)
	}
}

func failed() bool { return total.failed > 0 }

// openResults creates the results file: -results, else
// <cache>/results/rdstest.jsonl. A relative path is taken from the
// directory rdstest was started in.
func openResults() error {
	path := *flagResults
	if path == "" {
		cache, err := kernel.CacheDir()
		if err != nil {
			return err
		}
		path = filepath.Join(cache, "results", "rdstest.jsonl")
	}
	path, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	l, _, err := createResultsLog(path)
	if err != nil {
		return fmt.Errorf("results file: %w", err)
	}
	// The file stays open until the process exits; every line is
	// written as its result arrives.
	results = l
	return nil
}

// notePackages adds the per-package counts of kernel to the summary (the
// self-tests have their own line).
func notePackages(kernel string) {
	for _, l := range results.packageCounts(kernel, selfTestPkg) {
		summary = append(summary, "    "+l)
	}
}

func run() error {
	root, err := repo.Root("rdstest")
	if err != nil {
		return err
	}
	if err := os.Chdir(root); err != nil {
		return err
	}
	stage("host packages")
	if err := ensureHostPackages(); err != nil {
		return err
	}
	if *flagUnit {
		stage("go vet")
		if err := runCmd("go", "vet", "./..."); err != nil {
			note("go vet ./...: FAILED")
			fail("host", "go vet ./...")
		}
		if err := runCmd("go", "vet", "-tags", "integration", "./..."); err != nil {
			note("go vet -tags integration ./...: FAILED")
			fail("host", "go vet -tags integration ./...")
		}
		stage("gofmt")
		out, err := exec.Command("gofmt", "-l", ".").CombinedOutput()
		if err != nil || len(bytes.TrimSpace(out)) > 0 {
			fmt.Printf("gofmt -l . lists files that need formatting:\n%s", out)
			note("gofmt: FAILED")
			fail("host", "gofmt -l .")
		}
		if *flagCross {
			// Cross-builds take minutes on a cold build cache but need
			// no VM: they run niced beside everything else and are
			// reported at the end.
			defer startCrossChecks()()
		}
		if *flagShort && failed() {
			return nil
		}
		stage("unit tests (host)")
		t0 := time.Now()
		t, err := goTestJSON("host", false, nil, "test", "-count=1", "-json", "./...")
		if err != nil {
			note("unit tests: %v", err)
		}
		note("unit tests on the host: %s (%s)", t, time.Since(t0).Round(time.Second))
		total.add(t)
		if *flagShort && failed() {
			notePackages("host")
			return nil
		}
		if *flagRace {
			// Again with the race detector. The plain run above is the
			// one whose allocation tests mean something: under -race,
			// sync.Pool drops items at random and those tests skip.
			stage("unit tests (host, -race)")
			t0 := time.Now()
			t, err := goTestJSON("host", true, []string{"CGO_ENABLED=1"}, "test", "-race", "-count=1", "-json", "./...")
			if err != nil {
				note("unit tests with -race: %v", err)
			}
			note("unit tests on the host with -race: %s (%s)", t, time.Since(t0).Round(time.Second))
			total.add(t)
		}
		notePackages("host")
		if *flagShort && failed() {
			return nil
		}
	}

	cache, err := kernel.CacheDir()
	if err != nil {
		return err
	}
	binDir := filepath.Join(cache, "bin")
	rdsvm := filepath.Join(binDir, "rdsvm")
	selfcheck := filepath.Join(binDir, "selfcheck")
	stage("build rdsvm")
	for bin, pkg := range map[string]string{rdsvm: "./integration/cmd/rdsvm", selfcheck: "./integration/internal/selfcheck"} {
		cmd := exec.Command("go", "build", "-o", bin, pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stdout
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("build %s: %w", pkg, err)
		}
	}
	fmt.Printf("built %s\n", rdsvm)
	stage("build C reference programs")
	if err := buildCReferences(root); err != nil {
		return err
	}

	var kernels []string
	for _, k := range strings.Split(*flagKernels, ",") {
		if k = strings.TrimSpace(k); k != "" {
			kernels = append(kernels, k)
		}
	}
	if len(kernels) == 0 {
		return errors.New("no kernels selected")
	}
	stage("fetch kernels")
	// Each kernel is resolved once, here; the VM runs get its exact package
	// (and version), so every package of the run boots the same kernel.
	fetched := map[string]*kernel.Kernel{}
	var ready []string
	for _, k := range kernels {
		t0 := time.Now()
		kk, err := kernel.Fetch(cache, k, func(f string, a ...any) { fmt.Printf("rdstest: "+f+"\n", a...) })
		if err != nil {
			// Never drop a kernel quietly: it is a failure of the run.
			fmt.Printf("rdstest: %v\n", err)
			note("kernel %s: FAILED to fetch, not tested: %s", k, firstLine(err.Error()))
			fail(k, "fetch kernel "+k)
			continue
		}
		fetched[k] = kk
		ready = append(ready, k)
		fmt.Printf("kernel %s: %s (%s) ready in %s\n", k, kk.Release, kk.Spec(), time.Since(t0).Round(time.Millisecond))
	}
	if len(ready) == 0 {
		return errors.New("no kernel could be fetched")
	}
	if *flagShort && failed() {
		return nil
	}

	if *flagSelf {
		// The self-tests mostly wait (for a hang to time out, a peer to
		// be stopped): they run beside the integration tests, and their
		// outcome is printed when both are done.
		kk := fetched[ready[0]]
		type outcome struct {
			t       tally
			printed string
		}
		done := make(chan outcome, 1)
		go func() {
			t, printed := selfTests(rdsvm, selfcheck, kk.Spec(), kk.Release)
			done <- outcome{t, printed}
		}()
		defer func() {
			o := <-done
			t := o.t
			stage("rdsvm self-tests")
			fmt.Print(o.printed)
			note("rdsvm self-tests (kernel %s): %s", kk.Release, t)
			total.add(t)
		}()
	}

	var racePkgs []string
	if *flagRace {
		racePkgs = splitList(*flagRacePkgs)
	}
	pkgs, err := integrationPackages(racePkgs)
	if err != nil {
		return err
	}
	if len(pkgs.plain)+len(pkgs.race) == 0 {
		return errors.New("no package has integration-tagged tests")
	}
	rdsvmPath = rdsvm
	jobs, left := planVMJobs(ready, pkgs, defaultKernelList())
	if len(left) > 0 {
		fmt.Printf("not run with the default kernel list (the package's rdsvm.json names its kernels; -kernels runs every package on each kernel named): %s\n", strings.Join(left, ", "))
	}
	runVMJobs(jobs, ready, fetched)
	return nil
}

// kernelLabel names a kernel in the summary: its release and, when it was
// chosen by an alias, the alias and the package version it resolved to.
func kernelLabel(name string, k *kernel.Kernel) string {
	if strings.HasPrefix(name, "linux-image-") {
		return k.Release
	}
	if k.Version != "" {
		return fmt.Sprintf("%s (%s = %s %s)", k.Release, name, k.Package, k.Version)
	}
	return fmt.Sprintf("%s (%s = %s)", k.Release, name, k.Package)
}

// exitDetail adds a failed command's stderr to its error.
func exitDetail(err error) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) && len(ee.Stderr) > 0 {
		return fmt.Errorf("%v: %s", err, bytes.TrimSpace(ee.Stderr))
	}
	return err
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

func runCmd(name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stdout
	return cmd.Run()
}

// ensureHostPackages installs what the harness needs, or says what to install.
func ensureHostPackages() error {
	need := map[string]string{ // command -> Debian package
		"qemu-system-x86_64": "qemu-system-x86",
		"depmod":             "kmod",
		"dpkg-deb":           "dpkg",
		"apt-get":            "apt",
		"gcc":                "gcc", // cgo, which the race detector needs
		// To unpack the kernel image for a direct boot (see
		// kernel.BootImage): Debian's kernels are xz or zstd.
		"xz":   "xz-utils",
		"zstd": "zstd",
	}
	var missing []string
	for cmd, pkg := range need {
		if _, err := exec.LookPath(cmd); err != nil {
			missing = append(missing, pkg)
		}
	}
	if _, err := os.Stat("/usr/include/stdlib.h"); err != nil {
		missing = append(missing, "libc6-dev")
	}
	sort.Strings(missing)
	if len(missing) == 0 {
		fmt.Println("all host packages present (qemu-system-x86, kmod, dpkg, apt, gcc, libc6-dev, xz-utils, zstd)")
		return nil
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("missing host packages: run as root: apt-get install %s", strings.Join(missing, " "))
	}
	fmt.Printf("installing %s\n", strings.Join(missing, " "))
	env := append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	upd := exec.Command("apt-get", "update")
	upd.Env, upd.Stdout, upd.Stderr = env, os.Stdout, os.Stdout
	if err := upd.Run(); err != nil {
		return fmt.Errorf("apt-get update: %w", err)
	}
	inst := exec.Command("apt-get", append([]string{"install", "-y", "--no-install-recommends"}, missing...)...)
	inst.Env, inst.Stdout, inst.Stderr = env, os.Stdout, os.Stdout
	if err := inst.Run(); err != nil {
		return fmt.Errorf("apt-get install %s: %w", strings.Join(missing, " "), err)
	}
	return nil
}

// integrationPkgs are the packages with integration tests: plain builds,
// and -race builds; needRace are those of race whose rdsvm.json demands a
// -race build on every kernel; kernels holds, for the packages whose
// rdsvm.json names kernels, the kernels they run on by default.
type integrationPkgs struct {
	plain, race, needRace []string
	kernels               map[string][]string
}

// splitList splits a comma-separated list, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// integrationPackages lists the packages whose test files change with the
// integration build tag. Those named in race (package patterns such as
// ./integration/rdmafaults) and those whose rdsvm.json asks for it run
// with the race detector; a name in race that has no integration tests is
// an error.
func integrationPackages(race []string) (integrationPkgs, error) {
	var pkgs integrationPkgs
	forced := map[string]bool{}
	if len(race) > 0 {
		out, err := exec.Command("go", append([]string{"list"}, race...)...).Output()
		if err != nil {
			return pkgs, fmt.Errorf("go list %s: %w", strings.Join(race, " "), exitDetail(err))
		}
		for _, p := range strings.Fields(string(out)) {
			forced[p] = true
		}
	}
	dirs := map[string]string{}
	list := func(tags ...string) (map[string]string, error) {
		args := append([]string{"list"}, tags...)
		args = append(args, "-f", "{{.ImportPath}} {{.Dir}} {{join .TestGoFiles \",\"}} {{join .XTestGoFiles \",\"}}", "./...")
		out, err := exec.Command("go", args...).Output()
		if err != nil {
			return nil, fmt.Errorf("go %s: %w", strings.Join(args, " "), err)
		}
		m := map[string]string{}
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			p, rest, _ := strings.Cut(l, " ")
			dir, files, _ := strings.Cut(rest, " ")
			m[p], dirs[p] = files, dir
		}
		return m, nil
	}
	with, err := list("-tags", "integration")
	if err != nil {
		return pkgs, err
	}
	without, err := list()
	if err != nil {
		return pkgs, err
	}
	pkgs.kernels = map[string][]string{}
	for p, files := range with {
		if files == without[p] {
			continue
		}
		cfg, err := readPkgConfig(dirs[p])
		if err != nil {
			return pkgs, err
		}
		if len(cfg.Kernels) > 0 {
			pkgs.kernels[p] = cfg.Kernels
		}
		race := cfg.Race
		if race {
			pkgs.needRace = append(pkgs.needRace, p)
		}
		if forced[p] {
			race = true
			delete(forced, p)
		}
		if race {
			pkgs.race = append(pkgs.race, p)
		} else {
			pkgs.plain = append(pkgs.plain, p)
		}
	}
	for p := range forced {
		return pkgs, fmt.Errorf("-race-pkgs names %s, which has no integration tests", p)
	}
	sort.Strings(pkgs.plain)
	sort.Strings(pkgs.race)
	fmt.Printf("packages with integration tests: %s\n", strings.Join(pkgs.plain, " "))
	if len(pkgs.race) > 0 {
		fmt.Printf("with the race detector (-race-pkgs, or rdsvm.json \"race\": true): %s\n", strings.Join(pkgs.race, " "))
	}
	return pkgs, nil
}

// pkgConfig is what rdstest reads from a package's rdsvm.json (rdsvm
// reads the rest).
type pkgConfig struct {
	Race    bool     `json:"race"`    // a -race build on every kernel
	Kernels []string `json:"kernels"` // the kernels of a default run; none: all
}

// readPkgConfig reads the rdsvm.json in dir, if there is one. A kernel
// name that is not one of kernel.Aliases is an error: the restriction
// would silently never match.
func readPkgConfig(dir string) (pkgConfig, error) {
	var cfg pkgConfig
	file := filepath.Join(dir, "rdsvm.json")
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return cfg, nil
	}
	if err != nil {
		return cfg, err
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		return cfg, fmt.Errorf("%s: %w", file, err)
	}
	for _, k := range cfg.Kernels {
		if !slices.Contains(kernel.Aliases(), k) {
			return cfg, fmt.Errorf("%s: kernel %q is not one of %s", file, k, strings.Join(kernel.Aliases(), ", "))
		}
	}
	return cfg, nil
}

var bootLine = regexp.MustCompile(`rdsvm: kernel .*booted in`)

// goTestJSON runs go with args (which must include -json) and reads its
// output with a testRun for kernel ("host" or a release), recording every
// result in the results log.
func goTestJSON(kernel string, race bool, env []string, args ...string) (tally, error) {
	r, err := goTestRun(kernel, race, env, args...)
	return r.t, err
}

// goTestRun is goTestJSON that returns the whole testRun: its tally, and
// what it saw of rdsvm (how the guest kernel panicked, packages whose
// rdsvm fell silent).
func goTestRun(kernel string, race bool, env []string, args ...string) (*testRun, error) {
	r := newTestRun(kernel, race, os.Stdout, *flagVerbose, results)
	_, err := r.runGo(env, args...)
	return r, err
}

func (r *testRun) runGo(env []string, args ...string) (tally, error) {
	kernel, race := r.kernel, r.race
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stdout
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return r.t, err
	}
	if err := cmd.Start(); err != nil {
		return r.t, err
	}
	rerr := r.read(stdout)
	werr := cmd.Wait()
	collectMu.Lock()
	bootLines[kernel] = append(bootLines[kernel], r.boot...)
	reliabilityRows = append(reliabilityRows, r.reliability...)
	deviationRows = append(deviationRows, r.deviations...)
	collectMu.Unlock()
	if rerr != nil && r.t.failed == 0 {
		r.t.failed++
		results.record(result{Kernel: kernel, Package: "check", Test: "reading go test output", Race: race, Outcome: "fail"})
		return r.t, fmt.Errorf("reading go %s output: %w", strings.Join(args[:2], " "), rerr)
	}
	if werr != nil && r.t.failed == 0 {
		// go failed without a failing test or package (it could not
		// even list the packages): one failure.
		what := "go " + strings.Join(args[:2], " ")
		r.t.failed++
		results.record(result{Kernel: kernel, Package: "check", Test: what, Race: race, Outcome: "fail"})
		return r.t, fmt.Errorf("%s: %w", what, werr)
	}
	return r.t, nil
}

// selfTestPkg is the package name of self-test results.
const selfTestPkg = "rdsvm self-test"

// selfTests checks that rdsvm reports each kind of guest outcome.
func selfTests(rdsvm, selfcheck, kern, release string) (tally, string) {
	type check struct {
		name string
		env  []string
		args []string
		code func(int) bool
		want []string // substrings the combined output must contain
		slow bool     // runs beside the others instead of after them
		vms  int      // VMs asked for in rdsvm.json (0: rdsvm's default)
		// ran is what the output holds once the guest ran the check;
		// a run without it (the boot took the whole timeout) is run
		// once more ("" : never).
		ran string
	}
	var wg sync.WaitGroup
	checks := []check{
		{
			name: "exit code 0 is passed through",
			args: []string{"ok"},
			code: func(c int) bool { return c == 0 },
			want: []string{"selfcheck: ok on " + release, "booted in"},
		},
		{
			name: "a non-zero exit code is passed through",
			args: []string{"exit", "3"},
			code: func(c int) bool { return c == 3 },
			want: []string{"selfcheck: exiting with 3", "exit code 3"},
		},
		{
			name: "a missing module fails and is named",
			env:  []string{"RDSVM_EXTRA_MODULES=no_such_module"},
			args: []string{"ok"},
			code: func(c int) bool { return c != 0 },
			want: []string{"no_such_module"},
		},
		{
			name: "a hang past RDSVM_TIMEOUT fails with the console tail",
			env:  []string{"RDSVM_TIMEOUT=60s"},
			slow: true,
			args: []string{"hang"},
			code: func(c int) bool { return c != 0 },
			want: []string{"selfcheck: hanging", "timed out after 1m0s", "console", "rdsvm-init: running"},
			// In CI a guest once spent the minute booting (a soft
			// lockup in the kernel's crypto self-tests).
			ran: "rdsvm-init: running",
		},
		{
			name: "a failing peer VM fails the two-VM run",
			vms:  2,
			args: []string{"peer", "4"},
			code: func(c int) bool { return c == 4 },
			want: []string{"selfcheck: role main of 2 VMs exiting with 0",
				"[peer] selfcheck: role peer of 2 VMs exiting with 4", "VM peer booted in"},
		},
		{
			name: "a peer VM hanging after the main VM finished is stopped",
			vms:  2,
			env:  []string{"RDSVM_GRACE=20s"},
			args: []string{"peerhang"},
			slow: true,
			code: func(c int) bool { return c != 0 },
			want: []string{"selfcheck: main done", "[peer] selfcheck: peer hanging",
				"VM peer did not finish within 20s after the other VM did"},
		},
		{
			name: "a kernel panic fails with the console tail",
			args: []string{"panic"},
			code: func(c int) bool { return c != 0 },
			want: []string{"without reporting an exit status", "the guest kernel panicked: Kernel panic - not syncing"},
		},
	}
	// Each check runs rdsvm in a directory of its own: rdsvm names the
	// console logs after the working directory, and checks running side
	// by side must not write the same log (a hang check once read the
	// tail of another check's log).
	dirs := make([]string, len(checks))
	for i, c := range checks {
		dir, err := os.MkdirTemp("", fmt.Sprintf("rdstest-selfcheck%d-", i))
		if err == nil {
			defer os.RemoveAll(dir)
			if c.vms != 0 {
				err = os.WriteFile(filepath.Join(dir, "rdsvm.json"), fmt.Appendf(nil, `{"vms": %d}`, c.vms), 0o644)
			}
		}
		if err != nil {
			return tally{failed: 1}, fmt.Sprintf("--- FAIL: rdsvm self-tests: %v\n", err)
		}
		dirs[i] = dir
	}
	var t tally
	outputs := make([]string, len(checks))
	elapsed := make([]time.Duration, len(checks))
	ok := make([]bool, len(checks))
	// The slow check (mostly an idle guest) runs beside the others; those
	// run one after another so that boots do not compete for the CPUs.
	var serial sync.Mutex
	for i, c := range checks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !c.slow {
				serial.Lock()
				defer serial.Unlock()
			}
			t0 := time.Now()
			var out bytes.Buffer // every run's output
			last := ""           // the last run's
			code := 0
			for try := 1; ; try++ {
				cmd := exec.Command(rdsvm, append([]string{selfcheck}, c.args...)...)
				cmd.Dir = dirs[i]
				cmd.Env = append(append(os.Environ(), "RDSVM_KERNEL="+kern), c.env...)
				var o bytes.Buffer
				cmd.Stdout, cmd.Stderr = &o, &o
				err := cmd.Run()
				code = 0
				var ee *exec.ExitError
				if errors.As(err, &ee) {
					code = ee.ExitCode()
				} else if err != nil {
					code = -1
				}
				if try > 1 || c.ran == "" || strings.Contains(o.String(), c.ran) {
					out.Write(o.Bytes())
					last = o.String()
					break
				}
				fmt.Fprintf(&out, "rdstest: the guest did not run the check (no %q): booting again; that run's output:\n%s", c.ran, indent(o.String()))
			}
			var problems []string
			if !c.code(code) {
				problems = append(problems, fmt.Sprintf("unexpected exit code %d", code))
			}
			for _, w := range c.want {
				if !strings.Contains(last, w) {
					problems = append(problems, fmt.Sprintf("output lacks %q", w))
				}
			}
			elapsed[i] = time.Since(t0)
			d := elapsed[i].Round(100 * time.Millisecond)
			if len(problems) == 0 {
				ok[i] = true
				outputs[i] = fmt.Sprintf("--- PASS: rdsvm self-test: %s (%s)\n", c.name, d)
				if *flagVerbose {
					outputs[i] += indent(out.String())
				}
			} else {
				outputs[i] = fmt.Sprintf("--- FAIL: rdsvm self-test: %s (%s): %s\n%s",
					c.name, d, strings.Join(problems, "; "), indent(out.String()))
			}
		}()
	}
	wg.Wait()
	var printed strings.Builder
	for i, c := range checks {
		printed.WriteString(outputs[i])
		r := result{Kernel: release, Package: selfTestPkg, Test: c.name, Outcome: "pass", Elapsed: elapsed[i].Seconds()}
		if ok[i] {
			t.passed++
		} else {
			t.failed++
			r.Outcome = "fail"
		}
		results.record(r)
	}
	return t, printed.String()
}

func indent(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		b.WriteString("    " + l + "\n")
	}
	return b.String()
}

// reliabilityPrefix starts the one-line results the fault-injection tests
// log: "RELIABILITY|<fault>|kernel=<release>|<key>=<value>|...|outcome=<text>".
const reliabilityPrefix = "RELIABILITY|"

// reliabilityRows collects those lines from every test, passing or not.
var reliabilityRows []string

// printReliability prints the collected rows as one table per kernel.
func printReliability() {
	if len(reliabilityRows) == 0 {
		return
	}
	stage("reliability table")
	type row struct{ fault, kernel, counts, outcome string }
	var rows []row
	for _, l := range reliabilityRows {
		var r row
		var counts []string
		for i, f := range strings.Split(l, "|") {
			k, v, _ := strings.Cut(f, "=")
			switch {
			case i == 0:
				r.fault = f
			case k == "kernel":
				r.kernel = v
			case k == "outcome":
				r.outcome = v
			default:
				counts = append(counts, f)
			}
		}
		r.counts = strings.Join(counts, " ")
		rows = append(rows, r)
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].kernel < rows[j].kernel })
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "kernel\tfault\tcounts\toutcome")
	for _, r := range rows {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", r.kernel, r.fault, r.counts, r.outcome)
	}
	w.Flush()
}

// crossTargets are the GOOS/GOARCH pairs that must build and vet cleanly
// (CGO_ENABLED=0): every Linux architecture Go supports that users run,
// and a few other systems, where the library must compile even though it
// can do nothing there.
var crossTargets = []string{
	"linux/amd64", "linux/arm64", "linux/386", "linux/arm", "linux/s390x", "linux/ppc64le",
	"linux/riscv64", "linux/mips64le", "linux/loong64",
	"darwin/arm64", "freebsd/amd64", "windows/amd64",
}

// startCrossChecks starts go build and go vet for every cross target, two
// targets at a time (they share the build cache), at the lowest CPU
// priority. The returned report waits for them, prints their outcome and
// runs go mod tidy -diff; each failing target, and an untidy go.mod,
// counts as one failure, shown with its first lines of output.
func startCrossChecks() (report func()) {
	t0 := time.Now()
	res := make([]crossOutcome, len(crossTargets))
	sem := make(chan struct{}, 2)
	var wg sync.WaitGroup
	for i, target := range crossTargets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			goos, goarch, _ := strings.Cut(target, "/")
			env := append(os.Environ(), "GOOS="+goos, "GOARCH="+goarch, "CGO_ENABLED=0")
			for _, args := range [][]string{{"build", "./..."}, {"vet", "./..."}} {
				// nice: the VM tests beside them come first.
				cmd := exec.Command("nice", append([]string{"-n", "19", "go"}, args...)...)
				cmd.Env = env
				out, err := cmd.CombinedOutput()
				if err != nil {
					res[i] = crossOutcome{out: fmt.Sprintf("go %s: %v\n%s", strings.Join(args, " "), err, headLines(out, 12))}
					return
				}
			}
			res[i].ok = true
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	return func() {
		<-done
		stage("cross-builds and go mod tidy")
		reportCrossChecks(res, time.Since(t0))
	}
}

// crossOutcome is how the build and vet of one cross target went.
type crossOutcome struct {
	ok  bool
	out string
}

// reportCrossChecks prints the cross-build outcomes, counting each failing
// target as one failure, and runs go mod tidy -diff.
func reportCrossChecks(res []crossOutcome, took time.Duration) {
	var bad []string
	for i, target := range crossTargets {
		if res[i].ok {
			fmt.Printf("ok   %s\n", target)
			continue
		}
		fmt.Printf("FAIL %s\n%s", target, indent(res[i].out))
		bad = append(bad, target)
		fail("host", "cross-build "+target)
	}
	if len(bad) == 0 {
		note("cross-builds: all %d targets build and vet cleanly (%s, niced beside the other stages)", len(crossTargets), took.Round(time.Second))
	} else {
		note("cross-builds: FAILED on %d of %d targets: %s (%s)", len(bad), len(crossTargets),
			strings.Join(bad, " "), took.Round(time.Second))
	}
	out, err := exec.Command("go", "mod", "tidy", "-diff").CombinedOutput()
	if err != nil {
		fmt.Printf("go mod tidy -diff: %v\n%s", err, indent(headLines(out, 30)))
		note("go mod tidy -diff: FAILED")
		fail("host", "go mod tidy -diff")
	} else {
		fmt.Println("go mod tidy -diff: go.mod and go.sum are tidy")
	}
}

// headLines returns the first n lines of b.
func headLines(b []byte, n int) string {
	lines := strings.SplitAfter(strings.TrimRight(string(b), "\n")+"\n", "\n")
	if len(lines) > n {
		lines = append(lines[:n], fmt.Sprintf("... (%d more lines)\n", len(lines)-n-1))
	}
	return strings.Join(lines, "")
}
