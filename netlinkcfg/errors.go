package netlinkcfg

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error returned by this package that falls into one
// of these classes matches it with errors.Is; the underlying cause (often a
// syscall.Errno) stays reachable through errors.Is and errors.As too.
var (
	// ErrNotFound reports a missing link, address, RDMA device, sysfs or
	// procfs entry, or named namespace.
	ErrNotFound = errors.New("not found")
	// ErrExists reports that the object to create is already there.
	ErrExists = errors.New("already exists")
	// ErrModuleNotLoaded reports a kernel module (or built-in feature) that
	// the operation needs and the running kernel does not provide.
	ErrModuleNotLoaded = errors.New("kernel module not loaded")
	// ErrInvalid reports an argument rejected before reaching the kernel.
	ErrInvalid = errors.New("invalid argument")
	// ErrNotActive reports an RDMA port that did not reach ACTIVE in time.
	ErrNotActive = errors.New("rdma port not active")
	// ErrClosed reports use of a closed Namespace or Handle.
	ErrClosed = errors.New("closed")
)

// cfgError is the concrete error type of this package: a complete,
// human-oriented message plus the sentinels and causes it matches.
type cfgError struct {
	msg  string
	errs []error
}

func (e *cfgError) Error() string   { return e.msg }
func (e *cfgError) Unwrap() []error { return e.errs }

// newError builds a cfgError whose text is the formatted message, matching
// every non-nil error in wrapped.
func newError(wrapped []error, format string, args ...any) error {
	var errs []error
	for _, w := range wrapped {
		if w != nil {
			errs = append(errs, w)
		}
	}
	return &cfgError{msg: fmt.Sprintf(format, args...), errs: errs}
}

// invalidf reports a rejected argument.
func invalidf(format string, args ...any) error {
	return newError([]error{ErrInvalid}, format, args...)
}
