// Package blockserver is the classic RDS RDMA example: a server exporting
// a file as numbered blocks, and a client reading and writing them with
// zero copies.
//
// Read: the client sends the cookie of one of its pre-registered buffers
// and a block number; the server reads the block into its own buffer and
// RDMA-writes it into the client's, with immediate data saying "block N is
// in your buffer" (and its CRC-32), which the kernel delivers only after
// the data. Write: the server RDMA-reads the block from the client's
// buffer; the immediate data of that READ (sent with FENCE, so after the
// READ completed) tells the client its buffer is free again; after the
// block is written and the file fsynced, a separate message confirms it.
// The server recycles its own buffers when their RDMA completion status
// arrives (package barrier); the client's buffers cycle through an
// rdmaops.Pool, so no registration happens after Dial.
//
// Messages are 64 bytes, little-endian: kind, status, request ID, block,
// buffer index, CRC, cookie, and a SHA-256 for the checksum exchange.
// Package main in examples/blockserver runs either side.
package blockserver
