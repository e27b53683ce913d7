//go:build !linux

// Command rdstest is the project's single test command. It needs a Linux
// host (it boots Linux kernels under qemu); see TESTING.md.
package main

import (
	"fmt"
	"os"
	"runtime"
)

func main() {
	fmt.Printf("rdstest: runs on Linux only (this is %s); see TESTING.md\n", runtime.GOOS)
	fmt.Println("0 passed, 1 failed")
	os.Exit(1)
}
