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
 *
 * The sockets are an AF_UNIX SOCK_SEQPACKET pair made by rdsinstr: the
 * user-space work per message is what is counted, and it does not depend
 * on the address family.
 */
#define _GNU_SOURCE
#include <errno.h>
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
	fprintf(stderr, "usage: recvwait send FD N USEC | recvwait recv FD N\n");
	return 2;
}
