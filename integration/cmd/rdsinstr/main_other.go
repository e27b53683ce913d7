//go:build !linux

// Command rdsinstr counts rdssock's instructions per waiting read under
// callgrind; it runs on Linux only.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "rdsinstr: Linux only (it counts rdssock's Linux read path)")
	os.Exit(2)
}
