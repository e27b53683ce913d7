package bench

import (
	"slices"
	"testing"
)

func TestPerfCommands(t *testing.T) {
	bin, args := PerfRecord("/p", "/out/x.data", "/bin/tool", []string{"passive", "bind=1.2.3.4:5"})
	if bin != "/p/ld.so" {
		t.Errorf("PerfRecord runs %s, want the shipped loader /p/ld.so", bin)
	}
	want := []string{"--library-path", "/p", "/p/perf", "record", "-q", "-e", "cpu-clock", "-F", "4000", "-o", "/out/x.data", "--", "/bin/tool", "passive", "bind=1.2.3.4:5"}
	if !slices.Equal(args, want) {
		t.Errorf("PerfRecord args\n got %q\nwant %q", args, want)
	}
	bin, args = PerfReport("/p", "/out/x.data", "dso,sym")
	if bin != "/p/ld.so" || !slices.Contains(args, "dso,sym") || args[3] != "report" || args[5] != "/out/x.data" {
		t.Errorf("PerfReport = %s %q", bin, args)
	}
}
