// Package twovmfaults runs RDS RDMA fault tests between two VMs (its
// rdsvm.json asks for {"vms": 2}): the peer VM registers memory, the main
// VM streams RDMA operations into it and takes its own network link down
// and up in the middle, counting completions by status.
package twovmfaults
