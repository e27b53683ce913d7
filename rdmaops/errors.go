//go:build linux

package rdmaops

import "errors"

// Errors of this package. Errors from the socket are rdssock's
// *net.OpError values and pass through unchanged.
var (
	// ErrBusy: the memory is still registered or used by an operation.
	ErrBusy = errors.New("rdmaops: memory still in use by a registration or an RDMA operation")

	// ErrAtomicsDisabled: an atomic operation was requested without
	// Options.AllowAtomics. See the package documentation: on Soft-RoCE
	// an atomic silently wedges the connection.
	ErrAtomicsDisabled = errors.New("rdmaops: atomics are disabled: set Options.AllowAtomics only if the adapter implements masked atomics (Soft-RoCE does not, and an atomic wedges the connection)")

	// ErrBadOp: an operation or registration is malformed (no local
	// buffers, too many, too long, a span of a closed region...).
	ErrBadOp = errors.New("rdmaops: invalid RDMA operation")

	// ErrBufferState: a pool buffer was moved through its life cycle out
	// of order (released twice, landed while available...).
	ErrBufferState = errors.New("rdmaops: pool buffer is not in a state that allows this")

	// ErrPoolClosed: the pool was closed.
	ErrPoolClosed = errors.New("rdmaops: pool closed")

	// ErrFreed: the registration was already freed.
	ErrFreed = errors.New("rdmaops: registration already freed")
)
