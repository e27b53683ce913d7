// Command selfcheck is a tiny guest program used by rdstest to check the
// rdsvm harness itself: it exits with a chosen code, hangs, or panics the
// kernel, so the host side can verify that each outcome is reported.
//
//	selfcheck ok        print the kernel release and exit 0
//	selfcheck exit N    print a line and exit N
//	selfcheck hang      never exit
//	selfcheck panic     crash the guest kernel through sysrq
//	selfcheck peer N    exit 0 in the main VM and N in the peer VM
//	selfcheck peerhang  exit 0 in the main VM once the peer VM hangs
package main

import (
	"fmt"
	"net"
	"net/netip"
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
		// The main VM finishes only once the peer says it hangs, so that
		// rdsvm has a running peer to stop however slowly it booted (on
		// a loaded host one printed nothing in the 40s it was given).
		addr := netip.AddrPortFrom(vmtest.MainAddr4, peerhangPort)
		if vmtest.Role() == vmtest.RoleMain {
			if err := awaitPeer(addr, 3*time.Minute); err != nil {
				fmt.Println("selfcheck:", err)
			}
			fmt.Println("selfcheck: main done")
			return
		}
		fmt.Println("selfcheck: peer hanging")
		for {
			tellMain(addr)
			time.Sleep(200 * time.Millisecond)
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

// peerhangPort is the UDP port on which the main VM of "peerhang" waits
// for the peer's word.
const peerhangPort = 7999

// awaitPeer waits up to d for a datagram at addr.
func awaitPeer(addr netip.AddrPort, d time.Duration) error {
	c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(addr))
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(d))
	var b [16]byte
	if _, _, err := c.ReadFromUDPAddrPort(b[:]); err != nil {
		return fmt.Errorf("no word from the peer within %v: %w", d, err)
	}
	return nil
}

// tellMain sends a datagram to addr, ignoring errors (the main VM may not
// listen yet, or be gone).
func tellMain(addr netip.AddrPort) {
	c, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(addr))
	if err != nil {
		return
	}
	c.Write([]byte("hanging"))
	c.Close()
}
