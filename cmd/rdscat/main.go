// Command rdscat is netcat, ping, info and stress for Linux Reliable
// Datagram Sockets (AF_RDS) in one program.
//
//	rdscat listen 10.0.0.2:4000              print the messages received
//	echo hi | rdscat send 10.0.0.2:4000      send one message per line
//	rdscat ping -c 3 10.0.0.2                RDS ping (answered by the kernel)
//	rdscat info connections                  the kernel's RDS tables
//	rdscat stress -to 10.0.0.2:4000 ...      load generator and meter
//	rdscat demo                              RDS at work, in a VM if needed
//
// Run "rdscat help" for the commands and "rdscat COMMAND -h" for each one's
// flags and examples. Exit codes: 0 success, 1 failure, 2 usage error,
// 3 RDS or the transport not available, 4 timeout or no reply.
package main

import (
	"os"

	"github.com/go-rds/rds/cmd/rdscat/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
