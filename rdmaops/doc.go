// Package rdmaops performs RDS RDMA: registering local memory for a peer,
// RDMA READ and WRITE with immediate data, atomics, and a pool of
// pre-registered buffers. Completion tracking is package barrier's.
//
// It builds on Linux on every architecture Go supports; the socket must use the InfiniBand transport (rds_rdma, including RoCE and
// Soft-RoCE): on TCP and loopback every RDMA control message fails with
// EOPNOTSUPP.
//
// # The RDS RDMA model
//
// A client registers a buffer and obtains a cookie naming it; it sends the
// cookie to a server in an ordinary RDS message. The server issues an RDMA
// READ or WRITE against the cookie through its own socket, usually with
// immediate data: a message the kernel delivers to the client only once
// the RDMA completed, so "the data is in your buffer" arrives after the
// data. The server learns that its own local buffers are free again from
// the RDS_CMSG_RDMA_STATUS notice requested with RDS_RDMA_NOTIFY_ME, which
// package barrier turns into a locally complete high-water mark.
//
// # Memory
//
// RDMA memory is a Region: page-aligned memory mapped outside the Go heap,
// since a registration exposes whole pages and the kernel writes into it
// asynchronously. Spans name parts of a region. A region counts the
// registrations and in-flight operations using it and refuses to unmap
// until none is left. The small structures the kernel reads during sendmsg
// (the rds_iovec array, the cookie word) live in pooled heap scratch kept
// alive across the call.
//
// # Registration
//
// Conn.Register registers a span and sends a message carrying the cookie to
// the peer in one step. Two kernel mechanisms exist: the RDS_GET_MR socket
// option followed by an RDS_CMSG_RDMA_DEST message, and RDS_CMSG_RDMA_MAP,
// which registers and sends in one sendmsg. RDS_GET_MR fails with EOPNOTSUPP
// on FRWR adapters (every current RoCE adapter and Soft-RoCE), so RegAuto
// probes once and then uses the one that works. The first RDMA_MAP on a
// connection that is still coming up can fail with EAGAIN; Register retries
// it with a bounded backoff. A congested destination is waited out as Do
// waits it out (below), within the tracker's timeout; a sendmsg refused for
// congestion has freed the memory it mapped, so nothing leaks. The probe
// registers a page of the Conn's own, never the caller's memory, and frees
// it with invalidation. Conn.GetMR and GetMRForDest issue RDS_GET_MR alone,
// with no message; like every registration here they take a Span, so only
// memory this package mapped is ever registered.
//
// Keys are freed with MR.Free (RDS_FREE_MR, invalidating when registered
// with cmsg.FlagInvalidate); cmsg.FlagUseOnce makes the kernel drop a key
// after the first RDMA against it (not at once: see the BUG notes);
// Conn.Flush flushes the transport's pool of unused registrations; closing
// the socket drops all of its keys.
//
// # Operations
//
// Conn.Do queues an RDMA READ or WRITE (Op) with local scatter/gather, an
// optional payload sent as immediate data, and the flags FENCE and SILENT;
// NOTIFY_ME is set (on every operation unless Options.SignalEvery says
// otherwise) and the operation's barrier.Token is its user_token. Do returns
// once the kernel accepted the operation; it waits out a full send buffer,
// congestion and EAGAIN itself (in the runtime poller on a socket with
// rdssock.Config.WaitCongested), until the operation's deadline (by default
// the tracker's timeout) or the context ends, so callers write no retry
// loop. A program that issues and waits in one goroutine, as the examples
// do, waits as a C poll loop does: a read of the socket sleeps in the kernel
// (see rdssock's package documentation). Give a READ whose immediate data
// tells the peer something cmsg.FlagFence (Conn.Read does): without it the
// kernel may report the READ, and send the payload, before its data is in
// local memory.
//
// # Signaling every Nth operation
//
// With Options.SignalEvery N above 1, only every Nth READ or WRITE to a
// destination (address and port) asks for a completion status; the
// others complete as barrier.Covered when a later notified one to the
// same destination gets its status (see package barrier for why that
// status means that their memory is free, and what it does not say).
// That saves a status notice, and its share of a read, per operation;
// the kernel's own completion work is unchanged (it signals every
// message's send anyway). To keep that status meaningful the Conn:
//
//   - sets RDS_RDMA_FENCE on every notified operation, so that the READs
//     it covers have landed before its message goes out;
//   - never notifies a SILENT operation (one without payload posts no
//     send to complete); Op.Signal on a SILENT one fails with ErrBadOp;
//   - turns RDS_RECVERR on before the first unsignaled operation, so that
//     the kernel reports one it drops (Dropped, delivered as an amendment
//     when it comes after the cover);
//   - on Cancel, completes the destination's unsignaled operations as
//     Covered when the call returns (the kernel reports none for them).
//
// Give the last operation of a burst Op.Signal before waiting for it:
// Wait and WaitAll return barrier.ErrUnsealed for an operation that no
// notified one follows. Atomics are always notified.
//
// # Reading the socket
//
// Completion notices arrive on the socket as messages of their own, so
// the Conn reads the socket; the application does not, and writes no
// receive loop:
//
//   - Conn.Wait(ctx, tok) returns the operation's status, and
//     Conn.WaitAll(ctx, tok) waits for every operation up to tok. While
//     no other goroutine reads the socket through the Conn, the waiting
//     goroutine reads it itself and processes the notices, the way an
//     RDMA program polls its completion queue: no hand-off between
//     goroutines per operation. Otherwise it waits on the tracker and
//     takes over reading when the other reader stops.
//   - Conn.ReadMsg(ctx, b, oob) returns the next message that has data or
//     a sender, with the registration it announced (Msg.Dest); it
//     processes the control data of every message it reads and consumes
//     the notices.
//
// One goroutine reads at a time. A data message that a waiter meets is
// never lost: the waiter keeps it, up to Backlog messages, and ReadMsg
// returns those first, in order; a ReadMsg call that waits for the socket
// makes the waiter give way when data arrives. So an issuer that only
// calls Do and Wait, and a receiver that only calls ReadMsg, each need
// one goroutine. With a full backlog and no ReadMsg caller, a waiter
// still consumes the notices (the kernel hands them out ahead of data)
// but looks for them only every millisecond or so: call ReadMsg when the
// peer sends data. The tracker (Tracker) and HandleControl remain for
// programs that read the socket themselves; then do not mix in Wait or
// ReadMsg.
//
// examples/rdmawrite is a complete program written this way.
//
// # Memory lifetime
//
// The rule: memory that the kernel may still read or write is quarantined
// until the kernel says it is done, and nothing in this package hands it
// out before. That covers the local memory of an operation that is pending
// or timed out, and memory behind a key that is not yet revoked.
//
// For operations (Do, Read, Write, DoAtomic) the tracker of package barrier
// separates reporting from releasing. A timed-out operation is reported at
// its deadline (Wait and Status return barrier.TimedOut, a TimedOut
// completion is delivered), since that is how the caller learns that the
// remote end never answered; but the kernel may still perform the
// transfer, so the operation is released (its regions' Users drop, a pool
// buffer it used may be lent again, the tracker's high-water mark passes
// it) only when the memory is really free: its late kernel status arrives,
// the socket is closed (Close), or its destination is canceled (Cancel,
// whose late Canceled statuses release it). barrier.Config.OnRelease
// reports each release. Registrations (MR) count as users of their region
// until freed; a Pool quarantines revoked buffers until Confirm, and a
// buffer handed back while an operation that used it is not released
// until that release. Measured over Soft-RoCE on Linux 6.1 and 6.12
// (TestIntegrationLateTransferQuarantine): RDMA READs into a pool buffer
// with a 1 µs deadline were reported timed out before the adapter had
// written a byte in 5 of 19 and 13 of 20 cases, and their late statuses
// came 0.3 to 70 ms after the user handed the buffer back.
//
// # Pools
//
// A Pool registers a fixed set of buffers once. A buffer cycles Available
// → InTransmission (its cookie went to the peer, which reads or writes it)
// → Reading (the immediate data arrived; the reader consumes the data in
// place) → Returning → Available, so a steady stream of operations makes
// no registrations at all. A buffer that the kernel or the peer may still
// use is Quarantined instead of Available (see Pool).
//
// # Atomics
//
// FetchAdd, CompareSwap and their masked forms are encoded (Atomic,
// Conn.DoAtomic) but disabled unless Options.AllowAtomics is set.
//
// # Revocation and the safe pattern
//
// A freed key keeps working for a while (see the BUG notes): the only
// protection that does not depend on kernel timing is to keep memory a
// peer may still target mapped and unused until the peer confirms it is
// done with the cookie. A Pool does that with Buffer.Revoke (free the key,
// hold the buffer out of circulation) and Buffer.Confirm (new key,
// Available again); a region is never unmapped while a registration or an
// operation counts as its user (Region.Close fails with ErrBusy), and its
// pages are its own, so a late transfer can only reach the memory that
// was registered. Conn.Close resolves the operations still in flight and
// releases the timed-out ones; Conn.Cancel does so for one destination.
//
// BUG(rds): Freeing a registration does not revoke it at once: a peer's
// RDMA WRITE with the freed key (use-once keys too) can still land until
// the owner's peer has acknowledged the message that carried the
// registration and the transport's deferred flush ran; closing the
// owner's socket kills its keys at once. Reuse such memory only after the
// peer confirms it is done (Buffer.Revoke, Buffer.Confirm); TESTING.md
// ("Kernel defects measured") has the measurements.
//
// BUG(rds): RDS registers whole pages, and FRWR registrations (Soft-RoCE,
// current RoCE adapters) always grant remote write access, whatever the
// registration's length and flags. Only the page boundary protects memory:
// use Regions, never memory that shares pages with other data.
//
// BUG(rds): When an RDS/IB connection goes down, whatever the cause (a
// remote access error, the transport retry error of an overloaded
// adapter), the kernel cannot finish shutting it down while a
// registration made over it is alive (rds_ib_conn_path_shutdown waits
// for them, in the work queue all RDS connections share, so no other one
// comes up meanwhile). Until then the connection stays down: no message
// gets through, and the operations that were on their way get no status
// (RDS_RDMA_DROPPED comes once it is back). A plain C program
// (integration/internal/bench/cbaseline/resetstall.c, run by examples/rdmawrite's
// TestIntegrationExampleReset) saw this on Linux 6.1 and 6.12, and saw
// the connection come back once the owner freed the registration and
// flushed (MR.Free, Conn.Flush); TestBogusAndStaleCookies in
// integration/rdmafaults saw it come back only once the owner's socket
// was closed. An owner that sees a peer's operation fail, or loses
// contact (Connections shows its connection to the peer down), should
// close and reopen its socket and register again; examples/rdmawrite
// does.
//
// BUG(rds): When the RDMA device goes away, operations already posted end
// as RDS_RDMA_DROPPED and are not retried, and one not yet posted goes
// out after the reconnect with whatever key it carries. A registration
// made while the connection is torn down may hang (6.1) or yield a key
// that fails every use (6.12). After an outage the owner should close its
// socket and register again, and its peers ask it for a fresh key.
//
// BUG(rds): The kernel posts every RDS atomic as a masked atomic, which
// Soft-RoCE (rxe) does not implement: sendmsg succeeds, no completion
// status ever arrives, and no later message on that connection is
// delivered. This is why atomics need Options.AllowAtomics; use them only
// on hardware known to support masked atomics, and give them deadlines.
//
// BUG(rds): Read from the kernel source, not measured: sendmsg can fail
// with ENETUNREACH after it queued the message, when the connection is
// being destroyed (network namespace exit, module unload; net/rds/send.c,
// rds_sendmsg). Do then completes the operation as NotSent and releases
// memory that the dying connection may still hold.
//
// BUG(rds): On Linux 6.1, deleting a Soft-RoCE device under RDMA in
// flight between two addresses of the same host can hang the RDS work
// queue, even after the registering socket is closed. Stop RDMA on a
// device before deleting it.
//
// BUG(rds): RDS_GET_MR and RDS_GET_MR_FOR_DEST fail with EOPNOTSUPP on FRWR
// adapters (the kernel's FRWR code leaves them unimplemented), so on those
// a registration always travels with a message to one peer.
package rdmaops
