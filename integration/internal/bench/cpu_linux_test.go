//go:build linux

package bench

import (
	"bytes"
	"fmt"
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
	// The child's exec and dynamic loading take CPU: the window opens
	// once it sleeps in sleep(1), or a tick of its start-up may land in it
	// on a loaded host.
	waitSleeping(t, child.Process.Pid)
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

func TestCPUWindow(t *testing.T) {
	child := exec.Command("sleep", "5")
	if err := child.Start(); err != nil {
		t.Skip("no sleep command:", err)
	}
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()

	// A RESULT without a WINDOW line before it gives no reading.
	var w cpuWindow
	w.setPID(0, os.Getpid())
	w.setPID(1, child.Process.Pid)
	w.mark("RESULT msgs=1")
	if _, _, err := w.perMsg(100); err == nil {
		t.Error("perMsg without a WINDOW line succeeded")
	}

	w.mark("WINDOW")
	for end := time.Now().Add(100 * time.Millisecond); time.Now().Before(end); {
	}
	w.mark("RESULT msgs=1000")
	end := w.end[0]
	for stop := time.Now().Add(50 * time.Millisecond); time.Now().Before(stop); {
	}
	w.mark("RESULT msgs=2000") // a second RESULT does not move the end
	main, peer, err := w.perMsg(1000)
	if err != nil {
		t.Fatal(err)
	}
	// 100 ms of spinning is about 10 ticks: 100 us per message.
	if main <= 0 || peer != 0 {
		t.Errorf("perMsg = %v (this process), %v (a sleeping child); want > 0 and 0", main, peer)
	}
	if w.end[0] != end {
		t.Errorf("a second RESULT moved the end of the window from %d to %d ticks", end, w.end[0])
	}

	// A window that opens before the peer has started is an error.
	var early cpuWindow
	early.setPID(0, os.Getpid())
	early.mark("WINDOW")
	if _, _, err := early.perMsg(1); err == nil {
		t.Error("a window without the peer's process measured without error")
	}
}

func TestSchedUseOfThisProcess(t *testing.T) {
	// Sleeping is a voluntary switch of the sleeping thread; spinning
	// is user time.
	before, err := schedUse(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		time.Sleep(time.Millisecond)
	}
	for end := time.Now().Add(150 * time.Millisecond); time.Now().Before(end); {
	}
	after, err := schedUse(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if after[0].Voluntary < before[0].Voluntary+5 {
		t.Errorf("voluntary switches went from %d to %d over 5 sleeps", before[0].Voluntary, after[0].Voluntary)
	}
	if after[0].UserTicks <= before[0].UserTicks {
		t.Errorf("user ticks went from %d to %d while it spun for 150 ms", before[0].UserTicks, after[0].UserTicks)
	}
	if _, err := schedUse(1 << 30); err == nil {
		t.Error("schedUse of a process that does not exist succeeded")
	}
}

// waitSleeping waits until process pid runs sleep(1) and sleeps.
func waitSleeping(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			t.Fatal(err)
		}
		// pid (comm) state ...
		i := bytes.LastIndexByte(stat, ')')
		if bytes.Contains(stat[:max(i, 0)], []byte("(sleep")) && i+2 < len(stat) && stat[i+2] == 'S' {
			return
		}
	}
	t.Fatalf("process %d did not come to sleep in sleep(1) within 5 s", pid)
}
