//go:build !linux

// Command rdsvm runs a Go test binary inside a qemu VM booted with a Debian
// kernel that has AF_RDS. It needs a Linux host; see TESTING.md.
package main

import (
	"fmt"
	"os"
	"runtime"
)

func main() {
	fmt.Fprintf(os.Stderr, "rdsvm: runs on Linux only (this is %s): it boots Linux kernels under qemu "+
		"and is the guest's init; see TESTING.md\n", runtime.GOOS)
	os.Exit(2)
}
