//go:build linux && !(amd64 || arm64 || riscv64 || loong64)

package rdssock

// Kernels of the other architectures flag an error apart from the return
// value (mips, ppc64, sparc), or are untested with unix.RawSyscallNoError:
// system calls go through syscall.RawSyscall6, which decodes the flag.
const rawNoError = false
