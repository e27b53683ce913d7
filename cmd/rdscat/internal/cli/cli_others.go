//go:build !linux

package cli

import (
	"fmt"
	"io"
	"runtime"
)

// Main reports that rdscat needs Linux: RDS (AF_RDS) exists nowhere else.
// It returns exit code 3, "RDS not available".
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fmt.Fprintf(stderr, "rdscat: Reliable Datagram Sockets (AF_RDS) exist only on Linux, not on %s\n", runtime.GOOS)
	return 3
}
