// Command rdsvm runs a Go test binary inside a qemu VM booted with a Debian
// kernel that has AF_RDS, so that
//
//	go test -tags integration -exec /path/to/rdsvm ./pkg
//
// behaves as if the kernel under test were local: the test's output streams
// back live, and rdsvm exits with the test binary's exit code.
//
// rdsvm must be built static (CGO_ENABLED=0): it copies itself into the VM's
// initramfs, where it runs as /init and as /sbin/modprobe.
//
// See TESTING.md (repository root) for environment variables, rdsvm.json and the
// network topology inside the VM.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/go-rds/rds/integration/internal/guest"
)

func main() {
	switch {
	case os.Getpid() == 1:
		guest.Init()
	case filepath.Base(os.Args[0]) == "modprobe":
		os.Exit(guest.Modprobe(os.Args[1:]))
	}
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "-help" || os.Args[1] == "--help" {
		fmt.Fprintln(os.Stderr, "usage: rdsvm /path/to/pkg.test [test flags]\n"+
			"       (normally: go test -tags integration -exec /path/to/rdsvm ./pkg)\n"+
			"See TESTING.md (repository root).")
		os.Exit(2)
	}
	code, err := runHost(os.Args[1], os.Args[2:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "rdsvm: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}
