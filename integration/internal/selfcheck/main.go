// Command selfcheck is a tiny guest program used by rdstest to check the
// rdsvm harness itself: it exits with a chosen code, hangs, or panics the
// kernel, so the host side can verify that each outcome is reported.
//
//	selfcheck ok        print the kernel release and exit 0
//	selfcheck exit N    print a line and exit N
//	selfcheck hang      never exit
//	selfcheck panic     crash the guest kernel through sysrq
//	selfcheck peer N    exit 0 in the main VM and N in the peer VM
//	selfcheck peerhang  exit 0 in the main VM, hang in the peer VM
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/go-rds/rds/integration/vmtest"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: selfcheck ok|exit N|hang|panic")
		os.Exit(2)
	}
	if !vmtest.InGuest() {
		fmt.Fprintln(os.Stderr, "selfcheck: not inside the rdsvm guest")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "ok":
		fmt.Printf("selfcheck: ok on %s, role %s\n", vmtest.KernelRelease(), vmtest.Role())
	case "exit":
		n, err := strconv.Atoi(os.Args[2])
		if err != nil {
			n = 2
		}
		fmt.Printf("selfcheck: exiting with %d\n", n)
		os.Exit(n)
	case "peer":
		n := 0
		if vmtest.Role() == vmtest.RolePeer {
			n, _ = strconv.Atoi(os.Args[2])
		}
		fmt.Printf("selfcheck: role %s of %s VMs exiting with %d\n", vmtest.Role(), os.Getenv("RDSVM_VMS"), n)
		os.Exit(n)
	case "peerhang":
		if vmtest.Role() == vmtest.RoleMain {
			fmt.Println("selfcheck: main done")
			return
		}
		fmt.Println("selfcheck: peer hanging")
		for {
			time.Sleep(time.Hour)
		}
	case "hang":
		fmt.Println("selfcheck: hanging")
		for {
			time.Sleep(time.Hour)
		}
	case "panic":
		fmt.Println("selfcheck: crashing the kernel")
		if err := os.WriteFile("/proc/sys/kernel/sysrq", []byte("1"), 0); err != nil {
			fmt.Println(err)
		}
		if err := os.WriteFile("/proc/sysrq-trigger", []byte("c"), 0); err != nil {
			fmt.Println(err)
		}
		time.Sleep(time.Minute)
	default:
		fmt.Fprintf(os.Stderr, "selfcheck: unknown mode %q\n", os.Args[1])
		os.Exit(2)
	}
}
