package main

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// mountTracefs mounts tracefs where perf looks for the system call
// tracepoints that -perfstat counts (the guest's init mounts only what the
// tests need).
func mountTracefs() error {
	const dir = "/sys/kernel/tracing"
	if _, err := os.Stat(filepath.Join(dir, "events")); err == nil {
		return nil // mounted already
	}
	if err := unix.Mount("tracefs", dir, "tracefs", 0, ""); err != nil {
		return fmt.Errorf("-perfstat: mount tracefs on %s: %w", dir, err)
	}
	return nil
}
