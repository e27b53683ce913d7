//go:build linux

package rdmaops

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A Region is page-aligned memory mapped outside the Go heap
// (mmap(MAP_PRIVATE|MAP_ANONYMOUS)) for RDMA. A registration exposes whole
// pages to the peer, so registered memory must not share pages with
// unrelated data, and memory the kernel writes asynchronously must never be
// moved or reused by the Go runtime: a Region satisfies both.
//
// The region counts its users: every registration and every operation in
// flight that names it. Close refuses to unmap while any exists, and once
// it unmapped, the region takes no new user.
type Region struct {
	mu    sync.Mutex // serialises Close
	mem   []byte     // set by NewRegion, never written again (read without a lock)
	state atomic.Int64
	pool  *Pool // the pool whose buffers the region holds, if any
}

// regionClosed is the bit of Region.state set once Close unmapped the
// memory; the bits below count the users.
const regionClosed = int64(1) << 62

// NewRegion maps a region of at least size bytes, rounded up to whole
// pages. The memory is zeroed, populated, and excluded from fork
// (MADV_DONTFORK), as RDMA memory must be.
func NewRegion(size int) (*Region, error) {
	if size <= 0 {
		return nil, fmt.Errorf("rdmaops: region size %d", size)
	}
	ps := os.Getpagesize()
	size = (size + ps - 1) &^ (ps - 1)
	mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err != nil {
		return nil, os.NewSyscallError("mmap", err)
	}
	if err := unix.Madvise(mem, unix.MADV_DONTFORK); err != nil {
		unix.Munmap(mem)
		return nil, os.NewSyscallError("madvise", err)
	}
	return &Region{mem: mem}, nil
}

// Bytes returns the region's memory, nil after Close. It is valid until
// Close.
func (r *Region) Bytes() []byte {
	if r.state.Load()&regionClosed != 0 {
		return nil
	}
	return r.mem
}

// Len returns the region's size in bytes.
func (r *Region) Len() int { return len(r.mem) }

// Span returns the n bytes at offset off. It panics if they are not
// inside the region.
func (r *Region) Span(off, n int) Span {
	if off < 0 || n < 0 || off+n > len(r.mem) {
		panic(fmt.Sprintf("rdmaops: span [%d, %d) outside a region of %d bytes", off, off+n, len(r.mem)))
	}
	return Span{r: r, off: off, n: n}
}

// Users returns the number of registrations and in-flight operations that
// use the region.
func (r *Region) Users() int { return int(r.state.Load() &^ regionClosed) }

// acquire counts a new user unless the region is closed.
func (r *Region) acquire() bool {
	for {
		v := r.state.Load()
		if v&regionClosed != 0 {
			return false
		}
		if r.state.CompareAndSwap(v, v+1) {
			return true
		}
	}
}

func (r *Region) release() { r.state.Add(-1) }

// Close unmaps the region. It fails with ErrBusy while a registration or
// an operation still uses it: the kernel or the peer may still read or
// write the memory then.
func (r *Region) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	v := r.state.Load()
	if v&regionClosed != 0 {
		return nil
	}
	// Closed only from zero users: a user that comes in between fails
	// the swap, and none comes in after it.
	if v != 0 || !r.state.CompareAndSwap(0, regionClosed) {
		return fmt.Errorf("%w: %d registrations or operations still use the region", ErrBusy, r.Users())
	}
	return os.NewSyscallError("munmap", unix.Munmap(r.mem))
}

// A Span is a range of a Region: a local buffer for RDMA.
type Span struct {
	r      *Region
	off, n int
}

// Region returns the region the span belongs to.
func (s Span) Region() *Region { return s.r }

// Offset returns the span's offset in its region.
func (s Span) Offset() int { return s.off }

// Len returns the span's length.
func (s Span) Len() int { return s.n }

// Bytes returns the span's memory, nil after its region's Close.
func (s Span) Bytes() []byte {
	if s.r == nil || s.r.state.Load()&regionClosed != 0 {
		return nil
	}
	return s.r.mem[s.off : s.off+s.n : s.off+s.n]
}

// Slice returns the part [from, from+n) of the span.
func (s Span) Slice(from, n int) Span {
	if from < 0 || n < 0 || from+n > s.n {
		panic(fmt.Sprintf("rdmaops: slice [%d, %d) of a %d-byte span", from, from+n, s.n))
	}
	return Span{r: s.r, off: s.off + from, n: n}
}

// addr returns the user-space address of the span's first byte.
func (s Span) addr() uint64 {
	if s.r == nil || s.n == 0 {
		return 0
	}
	return uint64(uintptr(unsafe.Pointer(&s.r.mem[s.off])))
}
