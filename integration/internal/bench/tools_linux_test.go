//go:build linux

package bench

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestToolSideState: the report of one side's failure tells how the other
// side ended and what it printed, or that it was still running.
func TestToolSideState(t *testing.T) {
	var out capture
	out.add("rdsstress-c: passive task 0: FIN arrived while an answer was still pending")
	ended := &proc{done: make(chan struct{}), err: errors.New("exit status 1")}
	ended.stderr.WriteString("task 0 failed\n")
	close(ended.done)
	got := toolSide{ended, "receiver", &out}.state(time.Second)
	for _, want := range []string{"receiver: exit status 1", "FIN arrived while an answer was still pending", "task 0 failed"} {
		if !strings.Contains(got, want) {
			t.Errorf("state of an ended side lacks %q:\n%s", want, got)
		}
	}

	running := &proc{done: make(chan struct{})}
	start := time.Now()
	got = toolSide{running, "receiver", &out}.state(20 * time.Millisecond)
	if !strings.Contains(got, "receiver: still running 20ms later") || !strings.Contains(got, "FIN arrived") {
		t.Errorf("state of a running side:\n%s", got)
	}
	if waited := time.Since(start); waited < 20*time.Millisecond {
		t.Errorf("state waited %v for the running side, want 20ms", waited)
	}

	clean := &proc{done: make(chan struct{})}
	close(clean.done)
	if got := (toolSide{clean, "sender", &capture{}}).state(time.Second); !strings.HasPrefix(got, "sender: exited 0") {
		t.Errorf("state of a side that exited 0: %q", got)
	}
}
