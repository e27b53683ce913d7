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
// notice in them. An rdmaops.Conn does that itself in Wait, WaitAll and
// ReadMsg, which read the socket in the goroutine that needs the
// completion. An operation whose sendmsg failed is completed by the
// caller with Complete(token, NotSent).
//
// A completion is delivered in three ways, all optional: Wait and WaitAll
// return when the operations they name are done; Config.Completions makes
// the tracker send every Completion on a channel; Config.OnComplete is
// called for each. The Keep value given to Begin (typically the buffers the
// operation reads or writes) is handed back in the Completion.
//
// # Memory: completion and release
//
// Reporting an operation and giving its memory back are two steps. An
// operation is released when the kernel can no longer read or write its
// memory; only then is its Releaser called (Entry.Release, exactly once),
// Config.OnRelease run, and Keep dropped by the tracker.
//
// Most operations are released together with their completion: a kernel
// status, or NotSent from the caller, says the kernel is done. A timed-out
// operation is not: its deadline passing only means that no status came,
// and the kernel may still perform the transfer. It is reported at its
// deadline (Wait and Status return TimedOut, a TimedOut Completion is
// delivered), so the caller learns that the remote end did not answer, but
// its memory is quarantined until one of these happens:
//
//   - its late kernel status arrives (Process or Complete; counted in
//     Stats.Late);
//   - CompleteAll, once the socket is closed;
//   - its destination is canceled (Cancel around RDS_CANCEL_SENT_TO): the
//     kernel then reports the operations it gave up as Canceled, and those
//     late statuses release them.
//
// Complete(tok, TimedOut) abandons a pending operation the same way. An
// operation that completes while a Cancel runs is also reported at once and
// released only when the Cancel returns. Stats.Quarantined is the number of
// operations reported but not released.
// A quarantined operation stays findable by its token however many
// operations follow it: it leaves the ring for a side list, which holds at
// most one entry per operation begun and not yet released.
//
// # The high-water mark
//
// HighWater returns the largest token T such that every operation with a
// token at most T is complete and released: the library has handed back
// the ownership of every buffer those operations used. WaitAll(ctx, T) is
// the barrier: it returns once the mark reaches T. The mark says nothing
// about success: it rises for failed operations too (remote access errors,
// operations canceled, dropped when a connection goes down, or never
// sent). It does not pass a quarantined operation: a timed-out operation
// holds it until the operation is released, although Wait for that token
// returns TimedOut at the deadline. Success on the remote side is a matter
// for the application protocol: immediate data, or a reply.
//
// # Signaling every Nth operation
//
// Package rdmaops can send an operation without RDS_RDMA_NOTIFY_ME
// (Options.SignalEvery; operations begun with Begin are always expected
// to carry it). The kernel never reports such an operation's success; it
// completes, with status Covered, when a later notified operation to the
// same destination (the socket's lane: peer address and port) gets a
// kernel status, provided that the later one was begun after this one's
// sendmsg returned. Covered means that the memory is free and the
// outcome was not reported. It is not success, although Err returns nil.
//
// Why the memory is free, read from net/rds in Linux 6.1, 6.12 and 7.2
// (the same in all three): one RDS/IB connection has one queue pair, and
// the kernel posts messages in the order sendmsg queued them. A status
// comes from one of these paths:
//
//   - the send completion of the notified message. A signaled completion
//     on a reliable queue pair implies that every earlier work request
//     completed, and rds_ib_send_cqe_handler unmaps the ring in posting
//     order, so the earlier operations are unmapped first;
//   - the peer's acknowledgement (rds_send_drop_acked), which is
//     cumulative by sequence number. For READs it proves that the data
//     landed only if the notified message carries RDS_RDMA_FENCE, which
//     rdmaops sets on it;
//   - a drop after a reconnect (rds_send_xmit), which runs only after
//     rds_ib_conn_path_shutdown destroyed the old queue pair;
//   - a cancel, whose memory Cancel holds until the call returns, as for
//     notified operations.
//
// The outcome is another matter. With RDS_RECVERR the kernel reports a
// failed unsignaled operation, but only as RDS_RDMA_DROPPED, only after
// its connection is up again, possibly after the status that covered it,
// and also for one that did execute but was not yet acknowledged. A bogus
// key among unsignaled operations is never reported as a remote error:
// the completion path reports only notified operations. A status arriving
// for an operation already Covered is delivered again, as a Completion
// with Amended set (its memory was released with the first); Stats.Late
// counts it.
//
// Nothing completes an unsignaled operation until a later notified one to
// its destination is sent, its destination is canceled, or the socket is
// closed. Wait and WaitAll fail at once with ErrUnsealed rather than wait
// for such an operation; rdmaops.Op.Signal asks for the status on the
// last operation of a burst. A notified operation that fails to send
// (NotSent) covers nothing: the next notified one covers its operations.
//
// Measured over Soft-RoCE on Linux 6.1 and 6.12 (integration/rdmafaults
// and integration/twovmfaults, TestNthSignal*), with every operation's
// local memory overwritten the moment it was released: with every 8th
// operation notified, no poison reached the peer and no READ landed after
// its release, without faults, with a bogus key among unsignaled WRITEs
// (all eight operations then ended Dropped, the three that had executed
// included, once the connection came back), and with the RDMA device
// deleted and added again under 32 operations in flight. A notified
// operation with a bogus key ended RemoteError and covered the seven
// before it, whose data had landed. No amendment came in those runs.
//
// # Deadlines
//
// Every operation has a deadline unless configured otherwise:
// Entry.Deadline, or else Config.Timeout from Begin, which is
// DefaultTimeout (a minute) unless set (negative: none). When it passes
// with no status, the operation completes with status TimedOut and is
// quarantined (see above): that is how a caller learns that the peer or
// the kernel never answered. Begin reads no clock for
// a Config.Timeout: a tick every Timeout/16 (at least 1ms), running only
// while operations are begun, stamps the deadlines of those begun since
// the previous one, so such an operation times out at least Timeout and
// at most Timeout plus a tick after its Begin.
//
// # Concurrency and allocation
//
// A Tracker is safe for concurrent use by any number of senders and
// receivers. Begin, Complete and Process do not allocate in steady state:
// operation state lives in a ring indexed by token that grows only when more
// operations are outstanding than it holds, and quarantined operations in a
// list that grows only when more of them are quarantined at once than ever
// before; releasing one does not allocate. Wait allocates a small waiter
// only when it has to block; CompleteAll and Cancel may allocate.
//
// BUG(rds): A timed-out operation is not revoked: the kernel may still
// perform the RDMA after its deadline passed, so the tracker keeps its
// memory quarantined (no release, mark held) until a late status comes
// (its own, a cover's, or the Canceled one that Tracker.Cancel produces)
// or CompleteAll runs after the socket is closed. If the peer may never
// answer, cancel the destination or close the socket to get the memory
// back.
//
// BUG(rds): RDS_CANCEL_SENT_TO and closing the socket wait for the adapter
// to finish the operations it had started, but interruptibly: a signal that
// reaches the thread during that wait ends it early and the call still
// succeeds, so an operation released then may in rare cases still be
// running on the adapter.
package barrier
