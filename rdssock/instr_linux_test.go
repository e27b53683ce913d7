//go:build linux

package rdssock

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestInstrReadWait is the Go side of integration/cmd/rdsinstr, which runs
// it under callgrind to count the instructions a read that waits costs. It
// skips unless RDSINSTR_N is set; then it reads RDSINSTR_N messages from
// fd 3 (one end of a SOCK_SEQPACKET pair whose other end a paced sender
// holds) with ReadMsg (RDSINSTR_MODE nil) or ReadMsgContext with a
// background, cancelable or timeout context. RDSINSTR_NOPARK keeps every
// wait in ppoll (no park in the runtime poller every parkEvery).
func TestInstrReadWait(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("RDSINSTR_N"))
	if n <= 0 {
		t.Skip("run by integration/cmd/rdsinstr")
	}
	if os.Getenv("RDSINSTR_NOPARK") != "" {
		parkEvery = time.Hour
	}
	if err := unix.SetNonblock(3, true); err != nil {
		t.Fatalf("fd 3: %v", err)
	}
	c := newConn(newKfd(3))
	defer c.Close()
	var ctx context.Context
	cancel := context.CancelFunc(func() {})
	switch m := os.Getenv("RDSINSTR_MODE"); m {
	case "nil":
	case "background":
		ctx = context.Background()
	case "cancel":
		ctx, cancel = context.WithCancel(context.Background())
	case "timeout":
		ctx, cancel = context.WithTimeout(context.Background(), time.Hour)
	default:
		t.Fatalf("RDSINSTR_MODE %q: want nil, background, cancel or timeout", m)
	}
	defer cancel()
	buf := make([]byte, 128)
	for i := range n {
		var got int
		var err error
		if ctx == nil {
			got, _, _, _, err = c.ReadMsg(buf, nil)
		} else {
			got, _, _, _, err = c.ReadMsgContext(ctx, buf, nil, 0)
		}
		if err != nil || got != 64 {
			t.Fatalf("message %d of %d: %d bytes, %v", i, n, got, err)
		}
	}
}
