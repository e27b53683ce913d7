// Package twovm holds the harness test that runs in two VMs at once (its
// rdsvm.json asks for {"vms": 2}): RDS/IB over Soft-RoCE between the VMs'
// virtio-net links. Both VMs run the same test binary; vmtest.Role tells
// them apart.
package twovm
