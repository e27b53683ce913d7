//go:build linux

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
)

// testdata/gotest.json is real go test -json output (a passing, a failing
// and a skipped test, subtests, a package that does not build) plus a
// package of a two-VM run whose peer failed after its test passed.
func TestTestRun(t *testing.T) {
	in, err := os.Open("testdata/gotest.json")
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	var file, out bytes.Buffer
	log := newResultsLog(&file, "results.jsonl")
	r := newTestRun("6.1.0-test", false, &out, false, log)
	if err := r.read(in); err != nil {
		t.Fatal(err)
	}
	// Subtests count like tests; TestSub fails because TestSub/two did.
	if want := (tally{passed: 3, failed: 5, skipped: 1}); r.t != want {
		t.Errorf("tally %+v, want %+v", r.t, want)
	}
	shown := out.String()
	for _, s := range []string{
		"why it failed", "--- FAIL: TestFail", "two broke", "--- FAIL: TestSub ", "not here",
		"undefined: undefined", "FAIL\texample.com/canned/b [build failed]",
		"[peer] peer said goodbye", "package example.com/canned/c failed outside any single test",
		"not json: printed as it is",
	} {
		if !strings.Contains(shown, s) {
			t.Errorf("output lacks %q", s)
		}
	}
	for _, s := range []string{"quiet", "--- PASS", "=== RUN   TestPass", "package example.com/canned/a failed outside"} {
		if strings.Contains(shown, s) {
			t.Errorf("output shows %q", s)
		}
	}
	if len(r.boot) != 1 || !strings.Contains(r.boot[0], "booted in 7.0s") {
		t.Errorf("boot lines %q", r.boot)
	}
	if len(r.reliability) != 1 || r.reliability[0] != "fault=none|kernel=6.1.0-test|sent=10|outcome=ok" {
		t.Errorf("reliability rows %q", r.reliability)
	}
	if len(r.deviations) != 1 || r.deviations[0] != "accept-discard-loss|kernel=6.1.0-test|test=TestC|go=14|bound=118|c=181|basis=bounds|strict=1" {
		t.Errorf("deviation lines %q", r.deviations)
	}

	var got []string
	sc := bufio.NewScanner(&file)
	for sc.Scan() {
		var res result
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&res); err != nil {
			t.Fatalf("results line %q: %v", sc.Text(), err)
		}
		if res.Kernel != "6.1.0-test" || res.Race {
			t.Errorf("results line %q: kernel or race wrong", sc.Text())
		}
		got = append(got, strings.TrimPrefix(res.Package, "example.com/canned/")+" "+res.Test+" "+res.Outcome)
		if res.Test == "TestC" && res.Elapsed != 1.5 {
			t.Errorf("TestC elapsed %v, want 1.5", res.Elapsed)
		}
	}
	want := []string{
		"b  fail",
		"a TestPass pass", "a TestFail fail", "a TestSkip skip",
		"a TestSub/one pass", "a TestSub/two fail", "a TestSub fail",
		"c TestC pass", "c  fail",
	}
	if !slices.Equal(got, want) {
		t.Errorf("results:\n got %q\nwant %q", got, want)
	}
	counts := log.packageCounts("6.1.0-test", "")
	wantCounts := []string{
		"example.com/canned/a: 2 passed, 3 failed, 1 skipped",
		"example.com/canned/b: 0 passed, 1 failed",
		"example.com/canned/c: 1 passed, 1 failed",
	}
	if !slices.Equal(counts, wantCounts) {
		t.Errorf("packageCounts:\n got %q\nwant %q", counts, wantCounts)
	}
	if c := log.packageCounts("host", ""); len(c) != 0 {
		t.Errorf("packageCounts of another kernel: %q", c)
	}
}

func TestTestRunVerbose(t *testing.T) {
	in, err := os.ReadFile("testdata/gotest.json")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	r := newTestRun("host", true, &out, true, nil)
	if err := r.read(bytes.NewReader(in)); err != nil {
		t.Fatal(err)
	}
	if want := (tally{passed: 3, failed: 5, skipped: 1}); r.t != want {
		t.Errorf("tally %+v, want %+v", r.t, want)
	}
	if !strings.Contains(out.String(), "quiet") || !strings.Contains(out.String(), "--- PASS: TestPass") {
		t.Errorf("verbose output lacks the passing test's output:\n%s", out.String())
	}
}

func TestResultsLogRace(t *testing.T) {
	var file bytes.Buffer
	log := newResultsLog(&file, "x")
	log.record(result{Kernel: "host", Package: "github.com/go-rds/rds/rdssock", Test: "TestA", Race: true, Outcome: "pass", Elapsed: 0.25})
	log.record(result{Kernel: "host", Package: "github.com/go-rds/rds/rdssock", Test: "TestB", Outcome: "skip"})
	if got, want := file.String(), `{"kernel":"host","package":"github.com/go-rds/rds/rdssock","test":"TestA","race":true,"outcome":"pass","elapsed":0.25}
{"kernel":"host","package":"github.com/go-rds/rds/rdssock","test":"TestB","outcome":"skip","elapsed":0}
`; got != want {
		t.Errorf("file:\n%s\nwant:\n%s", got, want)
	}
	// A run with -race is counted apart from the plain run.
	if got := log.packageCounts("host", ""); !slices.Equal(got, []string{"./rdssock: 0 passed, 0 failed, 1 skipped", "./rdssock (race): 1 passed, 0 failed"}) {
		t.Errorf("packageCounts %q", got)
	}
}

func TestDeviationSummary(t *testing.T) {
	got := deviationSummary([]string{
		"reset-dup|kernel=6.12.1|test=TestLinkFailure/down-reset-up|go=3|bound=40|c=0|basis=bounds|strict=1",
		"accept-discard-loss|kernel=6.1.0|test=TestFreshConnection/both-ways|go=35|bound=20|c=181|basis=c|strict=1",
		"stale-congestion|kernel=6.1.0|test=TestCongestion|go=1|bound=-1|c=-1|basis=none|strict=1",
		"handshake-lane-switch|kernel=6.1.0|test=TestFreshConnection/x|go=2|bound=-1|c=0|basis=none|strict=0",
		"broken|kernel=6.1.0|go=x",
	})
	want := []string{
		"kernel 6.1.0: accept-discard-loss in TestFreshConnection/both-ways: Go 35, bound 20, C 181; accepted: reproduced in C",
		"kernel 6.1.0: stale-congestion in TestCongestion: Go 1, bound -, C -; FAILED (strict: no basis)",
		"kernel 6.1.0: handshake-lane-switch in TestFreshConnection/x: Go 2, bound -, C 0; accepted without a basis (not strict)",
		"kernel 6.12.1: reset-dup in TestLinkFailure/down-reset-up: Go 3, bound 40, C 0; accepted: within bounds",
		`DEVIATION line "broken|kernel=6.1.0|go=x": go: strconv.Atoi: parsing "x": invalid syntax`,
	}
	if len(got) != len(want)+1 {
		t.Fatalf("summary has %d lines, want %d:\n%s", len(got), len(want)+1, strings.Join(got, "\n"))
	}
	for i, w := range want {
		if g := strings.TrimSpace(got[i+1]); g != w {
			t.Errorf("line %d:\n got %s\nwant %s", i+1, g, w)
		}
	}
	if deviationSummary(nil) != nil {
		t.Error("a run without deviations prints a deviation section")
	}
	for _, bad := range []string{"", "x|kernel=k|test=t|go=1|basis=maybe|strict=1", "x|kernel=k|go=1|basis=c|strict=1"} {
		if _, err := parseDeviation(bad); err == nil {
			t.Errorf("parseDeviation(%q) accepted it", bad)
		}
	}
}

// A package whose rdsvm falls silent after its booting line, with no test
// started, is marked for a rerun; one where rdsvm said how the VM ended, a
// build failure, or a test that ran is not.
func TestSilentRdsvm(t *testing.T) {
	const pkg = "example.com/canned/r"
	out := func(s string) string {
		b, _ := json.Marshal(event{Action: "output", Package: pkg, Output: s + "\n"})
		return string(b)
	}
	fail := `{"Action":"fail","Package":"` + pkg + `","Elapsed":4.7}`
	booting := out("rdsvm: booting kernel 6.12.117+deb12-amd64 (linux-image-6.12.117+deb12-amd64), timeout 12m0s")
	for _, c := range []struct {
		name   string
		lines  []string
		silent bool
	}{
		{"killed while booting (ci, stop 27)", []string{booting, out("FAIL\t" + pkg + "\t4.702s"), fail}, true},
		{"killed after a boot retry", []string{booting,
			out("rdsvm: kernel 6.12.117+deb12-amd64: the main VM crashed while booting, before the test started (x; console log y); booting again, attempt 2 of 3"),
			fail}, true},
		{"rdsvm said how the VM ended", []string{booting,
			out("rdsvm: kernel 6.12.117+deb12-amd64: VM stopped without reporting an exit status (kernel panic, crash or lost output)"),
			fail}, false},
		{"rdsvm could not start", []string{out("rdsvm: build initramfs: no space left on device"), fail}, false},
		{"no rdsvm at all", []string{out("exit status 1"), fail}, false},
		{"rdsvm panicked", []string{booting, out("panic: runtime error: index out of range [3] with length 3"), out("FAIL\t" + pkg + "\t4.702s"), fail}, false},
		{"a test ran", []string{booting, `{"Action":"run","Package":"` + pkg + `","Test":"TestX"}`, fail}, false},
		{"build failure", []string{`{"Action":"fail","Package":"` + pkg + `","FailedBuild":"` + pkg + ` [` + pkg + `.test]"}`}, false},
	} {
		var shown bytes.Buffer
		r := newTestRun("6.12-test", false, &shown, false, nil)
		if err := r.read(strings.NewReader(strings.Join(c.lines, "\n") + "\n")); err != nil {
			t.Fatal(err)
		}
		if got := len(r.silent) == 1 && r.silent[0] == pkg; got != c.silent {
			t.Errorf("%s: silent %q, want %v", c.name, r.silent, c.silent)
		}
		if r.t.failed != 1 {
			t.Errorf("%s: %d failures, want 1", c.name, r.t.failed)
		}
	}
}

// A test binary that exits under a running test (a panic, os.Exit, the
// guest's timeout) leaves that test without a pass or fail event: its
// output must still be shown, with the package's failure.
func TestUnfinishedTestOutput(t *testing.T) {
	events := []string{
		`{"Action":"run","Package":"example.com/p","Test":"TestDone"}`,
		`{"Action":"output","Package":"example.com/p","Test":"TestDone","Output":"done quietly\n"}`,
		`{"Action":"pass","Package":"example.com/p","Test":"TestDone"}`,
		`{"Action":"run","Package":"example.com/p","Test":"TestStuck"}`,
		`{"Action":"output","Package":"example.com/p","Test":"TestStuck","Output":"the last words\n"}`,
		`{"Action":"run","Package":"example.com/q","Test":"TestOther"}`,
		`{"Action":"output","Package":"example.com/q","Test":"TestOther","Output":"other package\n"}`,
		`{"Action":"fail","Package":"example.com/p"}`,
	}
	var file, out bytes.Buffer
	r := newTestRun("6.1.0-test", false, &out, false, newResultsLog(&file, "results.jsonl"))
	if err := r.read(strings.NewReader(strings.Join(events, "\n") + "\n")); err != nil {
		t.Fatal(err)
	}
	shown := out.String()
	for _, s := range []string{"package example.com/p failed outside any single test", "TestStuck of example.com/p never finished", "the last words"} {
		if !strings.Contains(shown, s) {
			t.Errorf("output lacks %q:\n%s", s, shown)
		}
	}
	for _, s := range []string{"done quietly", "other package"} {
		if strings.Contains(shown, s) {
			t.Errorf("output shows %q:\n%s", s, shown)
		}
	}
}
