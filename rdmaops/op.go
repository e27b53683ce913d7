//go:build linux

package rdmaops

import (
	"fmt"
	"time"

	"github.com/go-rds/rds/cmsg"
	"github.com/go-rds/rds/internal/rdsabi"
)

// MaxLocal is the most local ranges (scatter/gather entries) one operation
// may name.
const MaxLocal = 16

// MaxTransfer is the most bytes one RDMA operation or registration may
// cover (RDS_MAX_MSG_SIZE).
const MaxTransfer = rdsabi.MaxMessageSize

// Op is an RDMA READ or WRITE against memory the peer registered.
type Op struct {
	// Write selects RDMA WRITE (local memory to the peer); otherwise the
	// operation is an RDMA READ (the peer's memory into local memory).
	Write bool

	// Remote is the peer's registration, RemoteOffset the offset in it
	// where the transfer starts (registrations are zero-based). The
	// transfer covers the total length of Local.
	Remote       cmsg.Cookie
	RemoteOffset uint64

	// Local lists the local ranges, in order (at most MaxLocal). Their
	// memory is pinned by the kernel for the transfer and stays in use
	// until the operation completes.
	Local []Span

	// Payload is the immediate data: an ordinary message sent right after
	// the RDMA and delivered to the peer only once the RDMA completed.
	// It may be empty.
	Payload []byte

	// Flags adds cmsg.FlagFence (the payload waits for the RDMA; needed
	// for a READ whose payload tells the peer its memory is free) and
	// cmsg.FlagSilent. FlagReadWrite and FlagNotifyMe are set by the
	// package.
	Flags cmsg.Flags

	// Deadline overrides the tracker's default timeout for this operation.
	Deadline time.Time

	// Keep is handed to the tracker and returned in the operation's
	// barrier.Completion.
	Keep any

	// Signal requests a completion status for this operation when
	// Options.SignalEvery leaves it to every Nth one: give it to the last
	// operation of a burst before waiting for it. A SILENT operation
	// cannot carry it.
	Signal bool
}

func (op *Op) total() (uint64, error) {
	if len(op.Local) == 0 || len(op.Local) > MaxLocal {
		return 0, fmt.Errorf("%w: %d local ranges (1 to %d)", ErrBadOp, len(op.Local), MaxLocal)
	}
	var n uint64
	for i, s := range op.Local {
		if s.r == nil || s.n == 0 {
			return 0, fmt.Errorf("%w: local range %d is empty", ErrBadOp, i)
		}
		n += uint64(s.n)
	}
	if n > MaxTransfer {
		return 0, fmt.Errorf("%w: %d bytes exceed the %d-byte limit of one RDMA", ErrBadOp, n, MaxTransfer)
	}
	return n, nil
}

// encodeRDMA fills iov with op's local ranges and appends the
// RDS_CMSG_RDMA_ARGS for op, whose local ranges op.total checked and found
// total bytes long, to b. iovAddr is the user-space address of iov.
func encodeRDMA(b *cmsg.Builder, op *Op, total uint64, iov *[MaxLocal]rdsabi.Iovec, iovAddr uint64, token uint64, extra cmsg.Flags) error {
	for i, s := range op.Local {
		iov[i] = rdsabi.Iovec{Addr: s.addr(), Bytes: uint64(s.n)}
	}
	flags := op.Flags&^(cmsg.FlagReadWrite|cmsg.FlagNotifyMe) | extra
	if op.Write {
		flags |= cmsg.FlagReadWrite
	}
	b.RDMAArgs(cmsg.RDMAArgs{
		Cookie:       op.Remote,
		Remote:       cmsg.IOVec{Addr: op.RemoteOffset, Bytes: total},
		LocalVecAddr: iovAddr,
		NumLocal:     uint64(len(op.Local)),
		Flags:        flags,
		UserToken:    token,
	})
	_, err := b.Finish()
	return err
}

// AtomicKind selects an atomic operation.
type AtomicKind uint8

// Atomic operations. The kernel posts every one of them as a masked
// atomic (the plain forms with all-ones masks).
const (
	FetchAdd          AtomicKind = iota + 1 // RDS_CMSG_ATOMIC_FADD
	CompareSwap                             // RDS_CMSG_ATOMIC_CSWP
	MaskedFetchAdd                          // RDS_CMSG_MASKED_ATOMIC_FADD
	MaskedCompareSwap                       // RDS_CMSG_MASKED_ATOMIC_CSWP
)

// String returns the operation's name.
func (k AtomicKind) String() string {
	switch k {
	case FetchAdd:
		return "fetch-add"
	case CompareSwap:
		return "compare-swap"
	case MaskedFetchAdd:
		return "masked fetch-add"
	case MaskedCompareSwap:
		return "masked compare-swap"
	}
	return fmt.Sprintf("atomic(%d)", uint8(k))
}

// Atomic is an RDMA atomic on one aligned 64-bit word of the peer's
// registration. See the package documentation before using one: Soft-RoCE
// cannot run them and wedges the connection.
type Atomic struct {
	Kind         AtomicKind
	Remote       cmsg.Cookie
	RemoteOffset uint64 // offset of the word in the registration; a multiple of 8

	// Result receives the word's previous value: 8 bytes, 8-aligned, in
	// use until the operation completes.
	Result Span

	Add         uint64 // FetchAdd, MaskedFetchAdd
	NocarryMask uint64 // MaskedFetchAdd: set bits stop carries
	Compare     uint64 // CompareSwap, MaskedCompareSwap
	Swap        uint64 // CompareSwap, MaskedCompareSwap
	CompareMask uint64 // MaskedCompareSwap
	SwapMask    uint64 // MaskedCompareSwap

	Flags    cmsg.Flags // extra flags (FlagFence, FlagSilent); FlagNotifyMe is set by the package
	Deadline time.Time
	Keep     any
}

// encodeAtomic appends the control message for a to b.
func encodeAtomic(b *cmsg.Builder, a *Atomic, token uint64) error {
	if a.Result.r == nil || a.Result.n != 8 || a.Result.addr()%8 != 0 {
		return fmt.Errorf("%w: an atomic's Result must be an 8-byte, 8-aligned span", ErrBadOp)
	}
	if a.RemoteOffset%8 != 0 {
		return fmt.Errorf("%w: atomic remote offset %d is not 8-aligned", ErrBadOp, a.RemoteOffset)
	}
	flags := a.Flags | cmsg.FlagNotifyMe
	local := a.Result.addr()
	switch a.Kind {
	case FetchAdd:
		b.AtomicFADD(cmsg.AtomicFADD{Cookie: a.Remote, LocalAddr: local, RemoteAddr: a.RemoteOffset, Add: a.Add, Flags: flags, UserToken: token})
	case CompareSwap:
		b.AtomicCSWP(cmsg.AtomicCSWP{Cookie: a.Remote, LocalAddr: local, RemoteAddr: a.RemoteOffset, Compare: a.Compare, Swap: a.Swap, Flags: flags, UserToken: token})
	case MaskedFetchAdd:
		b.MaskedAtomicFADD(cmsg.MaskedAtomicFADD{Cookie: a.Remote, LocalAddr: local, RemoteAddr: a.RemoteOffset, Add: a.Add, NocarryMask: a.NocarryMask, Flags: flags, UserToken: token})
	case MaskedCompareSwap:
		b.MaskedAtomicCSWP(cmsg.MaskedAtomicCSWP{Cookie: a.Remote, LocalAddr: local, RemoteAddr: a.RemoteOffset, Compare: a.Compare, Swap: a.Swap, CompareMask: a.CompareMask, SwapMask: a.SwapMask, Flags: flags, UserToken: token})
	default:
		return fmt.Errorf("%w: atomic kind %d", ErrBadOp, a.Kind)
	}
	_, err := b.Finish()
	return err
}
