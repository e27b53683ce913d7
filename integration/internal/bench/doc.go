// Package bench compares this library with a C program issuing the same
// system calls, side by side in one VM.
//
// # Programs
//
// The C baseline, cbaseline/rdsbench.c (in this package's directory), is a
// plain program with blocking AF_RDS sockets: sendmsg/recvmsg loops, recvmmsg
// for the batch receiver, RDMA WRITE with RDS_RDMA_NOTIFY_ME. The Go workers
// (Worker) implement the same roles with packages rdssock, rdmaops, barrier
// and cmsg, take the same key=value arguments (Options) and print the same
// "READY" and "RESULT key=value..." lines (ParseResult). Roles:
//
//	recv         count messages in a window (recvmsg, or recvmmsg/ReadBatch with batch>1)
//	send         flood a receiver until killed (Go: WriteMsg, or WriteBatch with batch>1)
//	echo         send every message back, until killed
//	ping         request/response round trips; p50 and p99
//	rdma-target  register a region once with RDS_CMSG_RDMA_MAP, drain the socket
//	rdma-init    RDMA WRITEs with notify, depth outstanding; completions per second
//
// A second C program, cbaseline/rdsstress.c, is a load generator of the
// rds-stress shape (forked tasks, one poll() loop per socket; rr, oneway,
// RDMA WRITE and READ with immediate data) that the rdscat binary is measured
// against (see Tools below). Its real-kernel test runs on the host and boots
// the VM itself:
//
//	go test -tags cbaseline -run TestCStress -v ./integration/internal/bench/cbaseline/rdsstresstest
//
// # Driver
//
// Run starts the workers as separate processes inside the rdsvm guest
// (see integration/vmtest for the topology), each workload Rounds times
// with the C and the Go implementation alternately, optionally diagnoses a
// few workloads with mixed pairings, and runs a C and a Go receiver side by
// side for a minute to watch their resident memory. In every run the
// driver reads the CPU time (utime+stime in /proc/PID/stat) of both
// processes when the measuring worker prints "WINDOW" and when it prints
// its RESULT, and reports it per message for each side (target Go/C at
// most 1.10). The Report renders as plain text (Report.Text) and as
// BENCHMARKS.md (Report.Markdown).
//
// # Tools
//
// After the workloads, Run measures the tools as users run them
// (Config.Tools, Report.ToolRows): the stress command of the rdscat binary
// against rdsstress-c, each as a receiver process and a sender process
// with the same tasks, depth and sizes (the receiver in the peer namespace
// over RDS/TCP, on the second address of the rxe link over RDS/IB), rounds
// alternating. Neither tool announces a window, so the driver keeps its
// own, the same for both: it opens Config.Warm after the workload's kernel
// RDS counter first moves and lasts Config.Window; at both edges the
// driver reads that counter (requests, messages or RDMA operations, see
// ToolWorkload.Counter) and the CPU time of both process trees. The tools
// are told to run ToolSetupSlack longer than warm-up and window, and must
// then exit cleanly with every message accounted for.
//
// The command integration/cmd/rdsbench builds everything and runs it:
//
//	go run ./integration/cmd/rdsbench
package bench
