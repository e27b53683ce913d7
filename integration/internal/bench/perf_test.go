package bench

import (
	"slices"
	"strings"
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
	_, args = PerfSwitches("/p", "/out/s.data", "/bin/tool", []string{"active"})
	want = []string{"--library-path", "/p", "/p/perf", "record", "-q", "-e", "sched:sched_switch", "-o", "/out/s.data", "--", "/bin/tool", "active"}
	if !slices.Equal(args, want) {
		t.Errorf("PerfSwitches args\n got %q\nwant %q", args, want)
	}
	bin, args = PerfReport("/p", "/out/x.data", "dso,sym")
	if bin != "/p/ld.so" || !slices.Contains(args, "dso,sym") || args[3] != "report" || args[5] != "/out/x.data" {
		t.Errorf("PerfReport = %s %q", bin, args)
	}
}

func TestPerfStat(t *testing.T) {
	bin, args := PerfStat("/p", "/out/x.stat", "/bin/tool", []string{"active"})
	if bin != "/p/ld.so" || args[3] != "stat" || !slices.Contains(args, "/out/x.stat") || args[len(args)-2] != "/bin/tool" || args[len(args)-1] != "active" {
		t.Fatalf("PerfStat = %s %q", bin, args)
	}
	i := slices.Index(args, "-e")
	if i < 0 || !strings.Contains(args[i+1], "raw_syscalls:sys_enter,context-switches") || !strings.Contains(args[i+1], "syscalls:sys_enter_gettid") {
		t.Errorf("PerfStat counts %q", args)
	}

	out := "# started on Fri Nov 27 17:06:34 2026\n\n" +
		"9000,,raw_syscalls:sys_enter,1631686,100.00,,\n" +
		"2000,,context-switches,1631686,100.00,,\n" +
		"<not counted>,,cpu-migrations,0,100.00,,\n" +
		"2000,,syscalls:sys_enter_recvmsg,1631686,100.00,,\n" +
		"1000,,syscalls:sys_enter_sendmsg,1631686,100.00,,\n" +
		"5,,syscalls:sys_enter_futex,1631686,100.00,,\n" +
		"0,,syscalls:sys_enter_gettid,1631686,100.00,,\n"
	counts, err := ParsePerfStat([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if counts["syscalls"] != 9000 || counts["context-switches"] != 2000 || counts["recvmsg"] != 2000 || counts["futex"] != 5 {
		t.Errorf("ParsePerfStat = %v", counts)
	}
	if _, ok := counts["cpu-migrations"]; ok {
		t.Error("ParsePerfStat kept an event perf did not count")
	}
	// futex, at 5 per 1000 messages, is below one per 100 and left out.
	if got, want := PerMessage(counts, 1000), "syscalls 9.00 switches 2.00 recvmsg 2.00 sendmsg 1.00"; got != want {
		t.Errorf("PerMessage = %q, want %q", got, want)
	}
	if _, err := ParsePerfStat([]byte("# started\n\n")); err == nil {
		t.Error("ParsePerfStat of no counts: no error")
	}
	if _, err := ParsePerfStat([]byte("12x,,context-switches,1,100.00,,\n")); err == nil {
		t.Error("ParsePerfStat of a malformed count: no error")
	}
}
