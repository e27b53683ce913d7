// Package twovmrdma runs RDS RDMA between two VMs (its rdsvm.json asks for
// {"vms": 2}): the block server in the peer VM, the client in the main VM,
// over Soft-RoCE on the VMs' virtio-net link.
package twovmrdma
