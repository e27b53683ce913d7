package vmtest

import (
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// KernelLog returns the lines of the kernel log (dmesg) that contain
// substr; "" returns them all. If the log cannot be read, the one line
// returned says why (tests log these lines rather than fail on them).
func KernelLog(substr string) []string {
	buf := make([]byte, 1<<20)
	n, err := unix.Klogctl(unix.SYSLOG_ACTION_READ_ALL, buf)
	if err != nil {
		return []string{"vmtest: reading the kernel log: " + os.NewSyscallError("klogctl", err).Error()}
	}
	var out []string
	for _, l := range strings.Split(string(buf[:n]), "\n") {
		if l != "" && strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return out
}

// DumpBlocked asks the kernel to log its blocked tasks and the stacks of
// its running CPUs (sysrq w and l, which also reach the console log, kept
// by rdsvm when a VM has to be stopped), and returns the new log lines
// that contain any of keep (all of them if keep is empty), at most max
// (0: no limit). It is for a test that finds the kernel stuck, to say
// where.
func DumpBlocked(max int, keep ...string) []string {
	before := KernelLog("")
	level, _ := os.ReadFile("/proc/sys/kernel/printk")
	os.WriteFile("/proc/sys/kernel/printk", []byte("8"), 0)
	for _, k := range []string{"w", "l"} {
		if err := os.WriteFile("/proc/sysrq-trigger", []byte(k), 0); err != nil {
			return []string{"sysrq: " + err.Error()}
		}
	}
	time.Sleep(300 * time.Millisecond)
	if len(level) > 0 {
		os.WriteFile("/proc/sys/kernel/printk", level, 0)
	}
	all := KernelLog("")
	if len(before) <= len(all) {
		all = all[len(before):] // the log is a ring: if it wrapped, keep all
	}
	var out []string
	for _, l := range all {
		if max > 0 && len(out) == max {
			break
		}
		if len(keep) == 0 {
			out = append(out, strings.TrimSpace(l))
			continue
		}
		for _, k := range keep {
			if strings.Contains(l, k) {
				out = append(out, strings.TrimSpace(l))
				break
			}
		}
	}
	return out
}
