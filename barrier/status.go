package barrier

import (
	"errors"

	"github.com/go-rds/rds/internal/rdsabi"
)

// Status is the outcome of a tracked operation.
type Status uint8

// Statuses. Every status but Pending is final and counts as locally
// complete for the high-water mark.
const (
	Pending     Status = iota // no status yet
	Success                   // RDS_RDMA_SUCCESS: the transfer completed
	RemoteError               // RDS_RDMA_REMOTE_ERROR: the peer refused the access (bad or stale key, bounds, permissions)
	Canceled                  // RDS_RDMA_CANCELED: given up by the kernel (CancelSentTo, socket closing), possibly while the adapter ran it
	Dropped                   // RDS_RDMA_DROPPED: discarded, typically when the connection went down
	OtherError                // RDS_RDMA_OTHER_ERROR or a status value this package does not know
	TimedOut                  // the deadline passed with no status from the kernel
	NotSent                   // the caller reported that sendmsg failed: the kernel never saw the operation
	Covered                   // sent without a status request and released by a later operation's status: memory free, outcome not reported (see "Signaling every Nth operation")
	Unknown                   // the token was never issued, or is too old to be remembered
)

var statusNames = [...]string{
	Pending:     "pending",
	Success:     "success",
	RemoteError: "remote error",
	Canceled:    "canceled",
	Dropped:     "dropped",
	OtherError:  "other error",
	TimedOut:    "timed out",
	NotSent:     "not sent",
	Covered:     "covered",
	Unknown:     "unknown",
}

// String returns the status name.
func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return "status(" + itoa(int(s)) + ")"
}

// Done reports whether s is final (anything but Pending and Unknown).
func (s Status) Done() bool { return s != Pending && s != Unknown }

// Err returns nil for Success, Covered and Pending, and otherwise the sentinel error
// for s, usable with errors.Is.
func (s Status) Err() error {
	switch s {
	case Success, Covered, Pending:
		return nil
	case RemoteError:
		return ErrRemote
	case Canceled:
		return ErrCanceled
	case Dropped:
		return ErrDropped
	case TimedOut:
		return ErrTimeout
	case NotSent:
		return ErrNotSent
	case Unknown:
		return ErrUnknownToken
	}
	return ErrOther
}

// FromKernel converts the status of an RDS_CMSG_RDMA_STATUS notice
// (struct rds_rdma_notify's status) to a Status.
func FromKernel(status int32) Status {
	switch status {
	case rdsabi.RDMASuccess:
		return Success
	case rdsabi.RDMARemoteError:
		return RemoteError
	case rdsabi.RDMACanceled:
		return Canceled
	case rdsabi.RDMADropped:
		return Dropped
	}
	return OtherError
}

// Errors for failed operations (Status.Err) and tracker misuse.
var (
	ErrRemote       = errors.New("barrier: RDMA operation failed at the remote end (bad or stale key, or access out of range)")
	ErrCanceled     = errors.New("barrier: RDMA operation canceled (its destination was canceled or the socket closed)")
	ErrDropped      = errors.New("barrier: RDMA operation dropped (connection went down)")
	ErrOther        = errors.New("barrier: RDMA operation failed")
	ErrTimeout      = errors.New("barrier: no completion status before the operation's deadline; the transfer may still happen")
	ErrNotSent      = errors.New("barrier: operation was never sent")
	ErrUnknownToken = errors.New("barrier: token not issued by this tracker, or too old to be remembered")
	ErrUnsealed     = errors.New("barrier: operation sent without a status request and not followed by one to its destination; nothing would complete it")
)

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	neg := n < 0
	if neg {
		n = -n
	}
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	if neg {
		i--
		b[i] = '-'
	}
	return string(b[i:])
}
