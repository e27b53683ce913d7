package vmtest

import "golang.org/x/sys/unix"

// KernelRelease returns the running kernel's release (uname -r).
func KernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}
