//go:build linux

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// result is one line of the results file: one counted outcome.
type result struct {
	// Kernel is "host" for tests run on the host, else the release of the
	// guest kernel.
	Kernel string `json:"kernel"`
	// Package is the Go import path, or "rdsvm self-test" or "check"
	// (vet, gofmt, cross-builds: recorded only when they fail).
	Package string `json:"package"`
	// Test is the test name, subtests as Parent/Sub; "" for a package
	// that failed outside any single test.
	Test    string  `json:"test"`
	Race    bool    `json:"race,omitempty"` // built with -race
	Outcome string  `json:"outcome"`        // pass, fail or skip
	Elapsed float64 `json:"elapsed"`        // seconds
}

// resultsLog writes results as JSON lines and counts them per kernel and
// package. It is safe for concurrent use.
type resultsLog struct {
	mu     sync.Mutex
	w      io.Writer
	path   string
	err    error
	counts map[[2]string]*tally // kernel, package
	order  [][2]string
}

func newResultsLog(w io.Writer, path string) *resultsLog {
	return &resultsLog{w: w, path: path, counts: map[[2]string]*tally{}}
}

// createResultsLog creates (truncates) the results file at path.
func createResultsLog(path string) (*resultsLog, *os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, nil, err
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, nil, err
	}
	return newResultsLog(f, path), f, nil
}

func (l *resultsLog) record(r result) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := [2]string{r.Kernel, r.Package}
	if r.Race {
		k[1] += " (race)"
	}
	c := l.counts[k]
	if c == nil {
		c = &tally{}
		l.counts[k] = c
		l.order = append(l.order, k)
	}
	switch r.Outcome {
	case "pass":
		c.passed++
	case "fail":
		c.failed++
	case "skip":
		c.skipped++
	}
	if l.w == nil || l.err != nil {
		return
	}
	b, err := json.Marshal(r)
	if err == nil {
		_, err = l.w.Write(append(b, '\n'))
	}
	l.err = err
}

// packageCounts returns one line per package that recorded results on
// kernel, sorted by package, leaving out the package named skip.
func (l *resultsLog) packageCounts(kernel, skip string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var keys [][2]string
	for _, k := range l.order {
		if k[0] == kernel && k[1] != skip {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i][1] < keys[j][1] })
	var lines []string
	for _, k := range keys {
		lines = append(lines, fmt.Sprintf("%s: %s", shortPkg(k[1]), *l.counts[k]))
	}
	return lines
}

// shortPkg drops the module path from an import path.
func shortPkg(p string) string {
	const mod = modulePath
	switch {
	case p == mod:
		return "."
	case strings.HasPrefix(p, mod+"/"):
		return "./" + strings.TrimPrefix(p, mod+"/")
	}
	return p
}

// event is one line of go test -json (test2json) output.
type event struct {
	Action      string
	Package     string
	Test        string
	Output      string
	Elapsed     float64
	FailedBuild string
}

// testRun turns the go test -json output of one run into the printed
// output, a tally and results.
type testRun struct {
	kernel  string // "host" or a kernel release
	race    bool
	out     io.Writer
	verbose bool
	log     *resultsLog

	t           tally
	buffered    map[[2]string][]string // output per package and test, until it ends
	failedTests map[string]int
	boot        []string // rdsvm's boot-time lines
	reliability []string // RELIABILITY| rows
	deviations  []string // DEVIATION| lines
	crashes     []string // rdsvm's "the guest kernel panicked: ..." lines

	started  map[string]bool   // a test of the package started
	lastLine map[string]string // the package's last line outside tests, but go's FAIL line
	// silent lists the packages whose rdsvm ended without a word after
	// it said it was booting, before any test started (see booting).
	silent []string
}

func newTestRun(kernel string, race bool, out io.Writer, verbose bool, log *resultsLog) *testRun {
	return &testRun{kernel: kernel, race: race, out: out, verbose: verbose, log: log,
		buffered: map[[2]string][]string{}, failedTests: map[string]int{},
		started: map[string]bool{}, lastLine: map[string]string{}}
}

// read consumes go test -json output until EOF. Lines that are not JSON
// are printed as they are.
func (r *testRun) read(rd io.Reader) error {
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		r.line(sc.Bytes())
	}
	return sc.Err()
}

func (r *testRun) record(e event, outcome string) {
	if r.log != nil {
		r.log.record(result{Kernel: r.kernel, Package: e.Package, Test: e.Test, Race: r.race,
			Outcome: outcome, Elapsed: e.Elapsed})
	}
}

// booting reports whether line, the last a package printed before go's
// FAIL line, is rdsvm's saying that it is booting the VM(s). Whenever
// rdsvm ends on its own it says why after that: how each VM ended, or the
// error that stopped it. So a run whose rdsvm fell silent there was killed
// from outside (once in CI, 4.7 s after the booting line, on a host that
// had ample memory), and nothing of its tests ran.
func booting(line string) bool {
	return strings.HasPrefix(line, "rdsvm: booting kernel ") ||
		(strings.HasPrefix(line, "rdsvm: kernel ") && strings.Contains(line, "; booting again, attempt "))
}

// line handles one line of output. Failing tests always show their
// output, passing ones only when verbose. Every test and subtest that
// passes, fails or skips counts once; a package that fails without a
// failing test counts as one failure.
func (r *testRun) line(b []byte) {
	var e event
	if err := json.Unmarshal(b, &e); err != nil {
		fmt.Fprintln(r.out, string(b))
		return
	}
	k := [2]string{e.Package, e.Test}
	flush := func() {
		// One write, so that the output of a test stays together when
		// several runs print at once.
		fmt.Fprint(r.out, strings.Join(r.buffered[k], ""))
	}
	switch e.Action {
	case "run":
		r.started[e.Package] = true
	case "output", "build-output":
		if bootLine.MatchString(e.Output) {
			r.boot = append(r.boot, strings.TrimSpace(e.Output))
		}
		if _, row, ok := strings.Cut(e.Output, reliabilityPrefix); ok {
			r.reliability = append(r.reliability, strings.TrimSpace(row))
		}
		if _, row, ok := strings.Cut(e.Output, deviationPrefix); ok {
			r.deviations = append(r.deviations, strings.TrimSpace(row))
		}
		if _, why, ok := strings.Cut(e.Output, guestPanicked); ok {
			r.crashes = append(r.crashes, strings.TrimSpace(why))
		}
		if e.Test == "" && !strings.HasPrefix(e.Output, "FAIL\t"+e.Package+"\t") {
			r.lastLine[e.Package] = e.Output
		}
		switch {
		case r.verbose:
			fmt.Fprint(r.out, e.Output)
		case e.Test == "" && strings.HasPrefix(e.Output, "[peer] "):
			// The peer VM's output is shown only when its package fails.
			r.buffered[k] = append(r.buffered[k], e.Output)
		case e.Test == "" && (e.Output == "PASS\n" || e.Output == "testing: warning: no tests to run\n"):
		case e.Test == "":
			fmt.Fprint(r.out, e.Output)
		default:
			r.buffered[k] = append(r.buffered[k], e.Output)
		}
	case "pass":
		if e.Test != "" {
			r.t.passed++
			r.record(e, "pass")
		}
		delete(r.buffered, k)
	case "skip":
		if e.Test != "" {
			r.t.skipped++
			r.record(e, "skip")
			if !r.verbose {
				flush()
			}
		}
		delete(r.buffered, k)
	case "fail":
		if !r.verbose {
			flush()
		}
		if e.Test != "" {
			r.t.failed++
			r.failedTests[e.Package]++
			r.record(e, "fail")
		} else if r.failedTests[e.Package] == 0 {
			// The package failed outside any test: build failure, a
			// crash before tests ran, or the peer VM failing.
			fmt.Fprintf(r.out, "rdstest: package %s failed outside any single test\n", e.Package)
			r.t.failed++
			r.record(e, "fail")
			if !r.started[e.Package] && e.FailedBuild == "" && booting(r.lastLine[e.Package]) {
				r.silent = append(r.silent, e.Package)
			}
		}
		if e.Test == "" {
			r.unfinished(e.Package)
		}
		delete(r.buffered, k)
	}
}

// unfinished shows the output of package pkg's tests that started but
// never passed or failed: the test binary exited under them (a panic, an
// os.Exit, the guest's timeout), and their output is all there is to say
// why.
func (r *testRun) unfinished(pkg string) {
	var tests []string
	for k := range r.buffered {
		if k[0] == pkg && k[1] != "" {
			tests = append(tests, k[1])
		}
	}
	sort.Strings(tests)
	for _, test := range tests {
		k := [2]string{pkg, test}
		fmt.Fprintf(r.out, "rdstest: %s of %s never finished (the test binary exited); its output:\n%s", test, pkg, strings.Join(r.buffered[k], ""))
		delete(r.buffered, k)
	}
}
