//go:build !linux

package main

import "errors"

// mountTracefs fails: the guest, which counts with -perfstat, is Linux.
func mountTracefs() error { return errors.New("-perfstat: counting system calls needs Linux") }
