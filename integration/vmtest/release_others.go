//go:build !linux

package vmtest

// KernelRelease returns "": the guest is always Linux, and elsewhere there
// is no kernel release to report.
func KernelRelease() string { return "" }
