//go:build !linux

package vmtest

// KernelLog returns one line saying that the kernel log is read in the
// Linux guest.
func KernelLog(substr string) []string {
	return []string{"vmtest: the kernel log is read in the rdsvm guest (Linux)"}
}

// DumpBlocked returns nothing: the kernel to ask is the Linux guest's.
func DumpBlocked(max int, keep ...string) []string { return nil }
