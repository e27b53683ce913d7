// Package twovmfaults runs RDS RDMA fault tests between two VMs (its
// rdsvm.json asks for {"vms": 2}): the peer VM registers memory, the main
// VM streams RDMA operations into it and takes its own network link down
// and up in the middle, counting completions by status.
//
// The tests need the build tags integration and rdsfaultlab, so rdstest
// does not run them: on Debian's 6.1 kernel, after the link flap every op
// still completed exactly once (195 success, 17 timed out of 212; the
// barrier passed 6.9 s after the link came back), but no new RDMA
// succeeded within 45 s, and closing the sockets afterwards hung the VM
// (the RDS/IB connection shutdown never finished). Run them by hand:
//
//	cd integration/twovmfaults
//	go test -tags integration,rdsfaultlab -exec /tmp/rdsvm -v .
package twovmfaults
