//go:build linux && (amd64 || arm64 || riscv64 || loong64)

package rdssock

// On these architectures unix.RawSyscallNoError is the system-call
// instruction itself, one call where syscall.RawSyscall6 takes two, and
// the kernel returns an error as a value in [-4095, -1] (see rawResult).
// The hot system calls (recvmsg, sendmsg, ppoll: three arguments, the
// rest zero) use it; every message makes two to four of them.
//
// Each call site spells out both forms, `if rawNoError { ... } else {
// ... }`, instead of calling a wrapper: a uintptr(unsafe.Pointer(p)) keeps
// p alive and in place only in the argument list of the assembly function
// itself, not of a Go function in between.
const rawNoError = true
