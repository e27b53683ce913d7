package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestProfilesRoundTrip(t *testing.T) {
	src := t.TempDir()
	files := map[string][]byte{
		"rr_tcp_1x1_64B-20010-sender.pprof":   {0x1f, 0x8b, 1, 2, 3},
		"rr_tcp_1x1_64B-20010-receiver.pprof": bytes.Repeat([]byte{0x1f, 0x8b, 0xff}, 5000),
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(src, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	out.WriteString("progress line\n" + jsonBegin + "\n{}\n" + jsonEnd + "\n")
	if err := printFiles(&out, src, profileLine, ".pprof"); err != nil {
		t.Fatal(err)
	}
	out.WriteString("rdsvm: the VM finished\n")
	paths, err := extractFiles(out.Bytes(), filepath.Join(t.TempDir(), "got"), profileLine, ".pprof")
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != len(files) {
		t.Fatalf("%d profiles extracted, want %d", len(paths), len(files))
	}
	for _, p := range paths {
		got, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if want := files[filepath.Base(p)]; !bytes.Equal(got, want) {
			t.Errorf("%s: %d bytes differ from the %d written", filepath.Base(p), len(got), len(want))
		}
	}
}

func TestExtractProfilesRefuses(t *testing.T) {
	for _, c := range []struct{ name, out, want string }{
		{"none", "no profiles here\n", "printed none"},
		{"a perf report where profiles are wanted", perfLine + " a.txt AAAA\n", "printed none"},
		{"path in the name", profileLine + " ../evil.pprof AAAA\n", "malformed"},
		{"not a profile name", profileLine + " notes.txt AAAA\n", "malformed"},
		{"bad base64", profileLine + " a.pprof !!!\n", "a.pprof"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := extractFiles([]byte(c.out), t.TempDir(), profileLine, ".pprof")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want one saying %q", err, c.want)
			}
		})
	}
}

func TestLddPaths(t *testing.T) {
	out := "\tlinux-vdso.so.1 (0x00007ffd)\n" +
		"\tlibelf.so.1 => /lib/x86_64-linux-gnu/libelf.so.1 (0x00007f01)\n" +
		"\tlibmissing.so.2 => not found\n" +
		"\t/lib64/ld-linux-x86-64.so.2 (0x00007f02)\n"
	got := lddPaths(out)
	if len(got) != 1 || got[0] != "/lib/x86_64-linux-gnu/libelf.so.1" {
		t.Errorf("lddPaths = %q, want only libelf's path", got)
	}
}

func TestPerfTrim(t *testing.T) {
	in := "# To display the perf.data header info, please use --header\n#\n# Samples: 5K of event 'cpu-clock'\n# Event count (approx.): 1364750000\n#\n# Overhead  Shared Object  Symbol   \n# ........  .............  ......\n#\n    56.13%  [kernel.kallsyms]  [k] finish_task_switch.isra.0   \n\n# (Cannot load tips.txt file, please install perf!)\n"
	want := "# Samples: 5K of event 'cpu-clock'\n# Event count (approx.): 1364750000\n    56.13%  [kernel.kallsyms]  [k] finish_task_switch.isra.0\n"
	if got := string(perfTrim([]byte(in))); got != want {
		t.Errorf("perfTrim:\n%s\nwant:\n%s", got, want)
	}
}

// TestHostRefuses: flag combinations that would mislead are refused
// before anything is built.
func TestHostRefuses(t *testing.T) {
	for _, args := range [][]string{
		{"-perfstat"},                    // counts need -perf DIR
		{"-perfswitch", "-run", "tools"}, // so do switches
		{"-perfswitch", "-perfstat", "-run", "tools", "-perf", t.TempDir()}, // one or the other
		{"-ab", "/tmp/rdscat-old"},        // an A/B run must not write BENCHMARKS.md
		{"-env-a", "GOMAXPROCS=4"},        // nor one of environments
		{"-perf", t.TempDir()},            // a profiled run must not either
		{"-rounds", "1", "-no-such-flag"}, // a typo
	} {
		if got := host(args); got != 2 {
			t.Errorf("rdsbench %q exits %d, want 2", args, got)
		}
	}
}

func TestWakeRounds(t *testing.T) {
	for _, c := range []struct {
		f    runFlags
		want int
	}{
		{runFlags{wake: 3}, 3},                                     // the whole benchmark
		{runFlags{wake: 0}, 0},                                     // skipped
		{runFlags{wake: 3, run: "tools"}, 0},                       // other sections only
		{runFlags{wake: 3, run: "tools rdma,wake"}, 3},             // named among them
		{runFlags{wake: 3, run: "wakeful"}, 0},                     // a word, not a substring
		{runFlags{wake: 3, run: "tools", envA: "GOMAXPROCS=1"}, 0}, // A/B runs compare rdscat builds only
	} {
		if got := c.f.wakeRounds(); got != c.want {
			t.Errorf("wakeRounds(wake %d, run %q, env-a %q) = %d, want %d", c.f.wake, c.f.run, c.f.envA, got, c.want)
		}
	}
	if s := reproduce(&runFlags{rounds: 5, warm: 500 * time.Millisecond, window: 2 * time.Second, long: time.Minute, diag: defaultDiag, wake: 0}, "6.1"); !strings.HasSuffix(s, " -wake 0") {
		t.Errorf("reproduce with -wake 0 = %q", s)
	}
}
