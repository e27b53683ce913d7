/*
 * recvwait: the C side of rdsinstr's instruction counts (see
 * integration/cmd/rdsinstr).
 *
 *   recvwait send FD N USEC   sends N 64-byte messages on FD with sendmsg,
 *                             as the C stress baseline does, one every USEC
 *                             microseconds
 *   recvwait recv FD N        receives N messages on FD the way the C stress
 *                             baseline (rdsstress.c) waits: ppoll, then
 *                             recvmsg with MSG_DONTWAIT until EAGAIN
 *   recvwait rdma FD N USEC   issues N RDMA WRITEs with 16 bytes of
 *                             immediate data on FD, one every USEC
 *                             microseconds, each in issue_rdma: the
 *                             RDS_CMSG_RDMA_ARGS built and sent with
 *                             sendmsg as rdsstress.c does (an AF_UNIX socket
 *                             ignores control messages of other levels)
 *
 * The sockets are an AF_UNIX SOCK_SEQPACKET pair made by rdsinstr: the
 * user-space work per message is what is counted, and it does not depend
 * on the address family.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/rds.h>
#include <stdint.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

static int send_paced(int fd, long n, long usec)
{
	char buf[64];
	memset(buf, 0x5a, sizeof(buf));
	for (long i = 0; i < n; i++) {
		struct timespec ts = {usec / 1000000, (usec % 1000000) * 1000};
		nanosleep(&ts, NULL);
		struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf)};
		struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
		if (sendmsg(fd, &m, 0) < 0) {
			perror("recvwait: sendmsg");
			return 1;
		}
	}
	return 0;
}

#ifndef SOL_RDS
#define SOL_RDS 276
#endif

/* issue_rdma is one operation of the C stress baseline's active side
 * (rdsstress.c, active_issue), the function rdsinstr counts: kept whole
 * and under its own name. */
int issue_rdma(int fd, uint64_t cookie, struct rds_iovec *lvec, char *imm, uint64_t token);
__attribute__((noinline, noclone)) int issue_rdma(int fd, uint64_t cookie, struct rds_iovec *lvec, char *imm, uint64_t token)
{
	struct iovec iov = {.iov_base = imm, .iov_len = 16};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
	union {
		char buf[CMSG_SPACE(sizeof(struct rds_rdma_args))];
		struct cmsghdr align;
	} ctl;
	struct rds_rdma_args args = {
		.cookie = cookie,
		.remote_vec = {.addr = 0, .bytes = lvec->bytes},
		.local_vec_addr = (uint64_t)(uintptr_t)lvec,
		.nr_local = 1,
		.flags = RDS_RDMA_READWRITE | RDS_RDMA_NOTIFY_ME,
		.user_token = token,
	};
	memset(&ctl, 0, sizeof(ctl));
	struct cmsghdr *c = (struct cmsghdr *)ctl.buf;
	c->cmsg_level = SOL_RDS;
	c->cmsg_type = RDS_CMSG_RDMA_ARGS;
	c->cmsg_len = CMSG_LEN(sizeof(args));
	memcpy(CMSG_DATA(c), &args, sizeof(args));
	m.msg_control = ctl.buf;
	m.msg_controllen = sizeof(ctl.buf);
	memcpy(imm, &token, sizeof(token));
	return sendmsg(fd, &m, 0) < 0 ? -1 : 0;
}

static int rdma_paced(int fd, long n, long usec)
{
	static char mem[4096];
	char imm[16] = {0};
	struct rds_iovec lvec = {.addr = (uint64_t)(uintptr_t)mem, .bytes = sizeof(mem)};
	for (long i = 0; i < n; i++) {
		struct timespec ts = {usec / 1000000, (usec % 1000000) * 1000};
		nanosleep(&ts, NULL);
		if (issue_rdma(fd, 1234, &lvec, imm, (uint64_t)i + 1) < 0) {
			perror("recvwait: sendmsg(RDS_CMSG_RDMA_ARGS)");
			return 1;
		}
	}
	return 0;
}

static int recv_all(int fd, long n)
{
	char buf[128];
	long got = 0;
	while (got < n) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		struct timespec ts = {10, 0};
		if (ppoll(&p, 1, &ts, NULL) == 0) {
			fprintf(stderr, "recvwait: no message for 10 s after %ld\n", got);
			return 1;
		}
		while (got < n) {
			struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf)};
			struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
			ssize_t k = recvmsg(fd, &m, MSG_DONTWAIT);
			if (k < 0) {
				if (errno == EAGAIN || errno == EINTR)
					break;
				perror("recvwait: recvmsg");
				return 1;
			}
			if (k == 0) {
				fprintf(stderr, "recvwait: the sender closed after %ld of %ld messages\n", got, n);
				return 1;
			}
			got++;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 5 && strcmp(argv[1], "send") == 0)
		return send_paced(atoi(argv[2]), atol(argv[3]), atol(argv[4]));
	if (argc == 4 && strcmp(argv[1], "recv") == 0)
		return recv_all(atoi(argv[2]), atol(argv[3]));
	if (argc == 5 && strcmp(argv[1], "rdma") == 0)
		return rdma_paced(atoi(argv[2]), atol(argv[3]), atol(argv[4]));
	fprintf(stderr, "usage: recvwait send FD N USEC | recvwait recv FD N | recvwait rdma FD N USEC\n");
	return 2;
}
