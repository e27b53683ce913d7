// Package barrier tracks asynchronous RDS RDMA operations from the moment
// they are queued until the kernel reports them locally complete, and keeps
// a "locally complete" high-water mark over them.
//
// # Tokens and completions
//
// A Tracker hands out tokens, increasing uint64 values starting at 1, one per
// operation (Begin). The caller puts the token in the operation's user_token
// (cmsg.RDMAArgs.UserToken) and sends it with RDS_RDMA_NOTIFY_ME; the kernel
// later queues an RDS_CMSG_RDMA_STATUS notice carrying the token and a
// status on the initiating socket. Whoever reads that socket passes the
// control bytes of each received message to Process, which resolves every
// notice in them. An operation whose sendmsg failed is completed by the
// caller with Complete(token, NotSent).
//
// A completion is delivered in three ways, all optional: Wait and WaitAll
// return when the operations they name are done; Config.Completions makes
// the tracker send every Completion on a channel; Config.OnComplete is
// called for each. The Keep value given to Begin (typically the buffers the
// operation reads or writes) is held until completion and handed back in
// the Completion; a Releaser is called once the operation is complete, so
// memory can be returned to its pool.
//
// # The high-water mark
//
// HighWater returns the largest token T such that every operation with a
// token at most T is locally complete: its status arrived, it timed out, or
// it was never sent. WaitAll(ctx, T) is the barrier: it returns once the
// mark reaches T. The mark says nothing about success: it rises for
// failed operations too (remote access errors, operations canceled or
// dropped when a connection goes down). Success on the remote side is a
// matter for the application protocol: immediate data, or a reply.
//
// # Deadlines
//
// An operation may carry a deadline (Op.Deadline, or Config.Timeout from
// Begin). When it passes with no status, the operation completes with
// status TimedOut: waiters wake, the mark rises and Keep is handed back. A
// status that arrives later is counted in Stats.Late and otherwise ignored.
//
// # Concurrency and allocation
//
// A Tracker is safe for concurrent use by any number of senders and
// receivers. Begin, Complete and Process do not allocate in steady state:
// operation state lives in a ring indexed by token that grows only when more
// operations are outstanding than it holds. Wait allocates a small waiter
// only when it has to block.
//
// BUG(rds): A timed-out operation is not revoked. The kernel may still
// perform the RDMA after its deadline passed: a buffer handed back by a
// timeout can still be read or written by the transfer. Callers that reuse
// such memory must first make sure the transfer cannot happen any more (for
// example CancelSentTo or closing the socket, or waiting for the late status
// counted in Stats.Late).
package barrier
