//go:build linux

package bench

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

func TestCPUTicksOfThisProcessAndAChild(t *testing.T) {
	// This process's CPU time grows while it spins; a sleeping child is
	// found too.
	child := exec.Command("sleep", "5")
	if err := child.Start(); err != nil {
		t.Skip("no sleep command:", err)
	}
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
	before, err := cpuTicks(os.Getpid(), child.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(150 * time.Millisecond); time.Now().Before(end); {
	}
	after, err := cpuTicks(os.Getpid(), child.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if after[0] <= before[0] {
		t.Errorf("this process's ticks went from %d to %d while it spun for 150 ms", before[0], after[0])
	}
	if _, err := cpuTicks(1 << 30); err == nil {
		t.Error("cpuTicks of a process that does not exist succeeded")
	}
}
