// rdsfault: a plain C RDS/TCP flow for reproducing, under the same fault in
// the same VM run, the delivery deviations the Go reliability tests accept.
//
// It binds one receiving socket in a network namespace (netns=, joined only
// for the socket() and bind() calls) and `senders` sending sockets in the
// caller's namespace, all blocking, as a C application would use RDS. The
// senders send numbered messages (sender id, sequence number, a varied
// payload and a checksum) to the receiver, pacing one message per pace_us,
// until standard input reaches end of file (or, with count=N, until each
// sent N messages, at once after start: the first messages on a brand-new
// connection, with no warm-up); then the receiver waits until
// every accepted message arrived or nothing arrived for idle_ms, and the
// program prints one line:
//
//   RDSFAULT|accepted=N|received=N|lost=N|dup=N|reordered=N|corrupt=N|blocks=N|senderr=N|stuck=N|stuckcong=N
//
// lost counts accepted messages that never arrived, dup extra copies,
// reordered first copies that arrived after a higher sequence number of the
// same sender, blocks the runs of consecutive lost messages (summed over
// senders), senderr the sends that failed with an error other than ENOBUFS
// (congestion, retried). A sender whose message the kernel has refused
// (ENOBUFS, or EAGAIN with nonblock=1) for stuck_ms stops: stuck counts
// those senders, stuckcong those of them last refused as congested.
//
// usage: rdsfault-c local=ADDR peer=ADDR port=BASE [netns=PATH]
//                   [sendns=PATH] [senders=2] [pace_us=1000] [idle_ms=3000]
//                   [count=N] [nonblock=1] [stuck_ms=20000]
// The receiver binds peer:BASE in netns= (default: the caller's), sender i
// binds local:BASE+1+i in sendns= (default: the caller's). IPv4 only.
// With nonblock=1 the senders send with MSG_DONTWAIT and wait in poll for
// POLLOUT on EAGAIN, as a non-blocking application (and the Go library)
// does; the kernel then does not hold their first messages back until the
// multipath handshake is done.
//
// usage: rdsfault-c probe=PORT local=ADDR peer=ADDR [sendns=PATH]
// The congestion probe: one new socket bound to local (a port the kernel
// picks, in sendns=) sends one empty message to peer:PORT with
// MSG_DONTWAIT, as the Go tests' probe of a destination that stays
// congested does, and prints
//
//   RDSFAULT-PROBE|result=congested   (ENOBUFS: the kernel marks the port congested)
//   RDSFAULT-PROBE|result=sent
//   RDSFAULT-PROBE|result=error|errno=N|error=TEXT
//
// IPv4 or IPv6 addresses.
//
// usage: rdsfault-c ping=N local=ADDR peer=ADDR [sendns=PATH] [limit_ms=15000]
// The path check: N new sockets bound to local (ports the kernel picks, in
// sendns=) each send an RDS ping (an empty message to port 0) to peer, again
// every second until the peer's kernel answers or limit_ms passes, as the Go
// tests' recovery check does, and it prints
//
//   RDSFAULT-PING|sockets=N|answered=M|slowest_ms=T
//
// A socket's messages take the path its bound port hashes to, so N sockets
// reach every path of a multipath RDS/TCP connection with high probability.
// IPv4 or IPv6 addresses.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef AF_RDS
#define AF_RDS 21
#endif

#define MAXSENDERS 8
#define MAXSEQ (1u << 20)
#define HDR 20 /* magic, sender, seq (8), payload length */
#define MAGIC 0x52444643u /* "RDFC" */

static struct sockaddr_in local_sa, peer_sa;
static int port_base, nsenders = 2, pace_us = 1000, idle_ms = 3000, stuck_ms = 20000;
static long count;
static int nonblock;
static const char *sendns;
static atomic_int stop_sending, senders_done;
static atomic_long accepted[MAXSENDERS];
static atomic_long senderr, stuck, stuckcong;
static int rfd;

static void die(const char *what)
{
	fprintf(stderr, "rdsfault-c: %s: %s\n", what, strerror(errno));
	exit(1);
}

/* enter_sendns moves the calling thread (only) into sendns=, if given. */
static void enter_sendns(void)
{
	if (!sendns)
		return;
	int ns = open(sendns, O_RDONLY);
	if (ns < 0 || setns(ns, CLONE_NEWNET) < 0)
		die(sendns);
	close(ns);
}

static uint32_t sum(const unsigned char *b, size_t n)
{
	uint32_t h = 2166136261u; /* FNV-1a */
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 16777619u;
	return h;
}

static void put32(unsigned char *b, uint32_t v)
{
	b[0] = v >> 24; b[1] = v >> 16; b[2] = v >> 8; b[3] = v;
}

static uint32_t get32(const unsigned char *b)
{
	return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

static int rds_socket(struct sockaddr_in *at)
{
	int fd = socket(AF_RDS, SOCK_SEQPACKET, 0);
	if (fd < 0)
		die("socket(AF_RDS)");
	if (bind(fd, (struct sockaddr *)at, sizeof(*at)) < 0)
		die("bind");
	return fd;
}

static long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void *sender(void *arg)
{
	int id = (int)(intptr_t)arg;
	enter_sendns(); /* this thread only */
	struct sockaddr_in me = local_sa;
	me.sin_port = htons(port_base + 1 + id);
	int fd = rds_socket(&me);
	unsigned char buf[HDR + 4096 + 4];
	uint32_t rnd = 12345u + id;
	for (uint64_t seq = 0; seq < MAXSEQ && !atomic_load(&stop_sending) && (count == 0 || (long)seq < count); seq++) {
		rnd = rnd * 1103515245u + 12345u;
		uint32_t n = (rnd >> 8) % 4096;
		put32(buf, MAGIC);
		put32(buf + 4, id);
		put32(buf + 8, seq >> 32);
		put32(buf + 12, (uint32_t)seq);
		put32(buf + 16, n);
		for (uint32_t i = 0; i < n; i++)
			buf[HDR + i] = (unsigned char)(seq * 31 + i);
		put32(buf + HDR + n, sum(buf, HDR + n));
		long refused_since = 0; /* when the kernel first refused this message */
		for (;;) {
			ssize_t r = sendto(fd, buf, HDR + n + 4, nonblock ? MSG_DONTWAIT : 0, (struct sockaddr *)&peer_sa, sizeof(peer_sa));
			if (r >= 0) {
				atomic_fetch_add(&accepted[id], 1);
				break;
			}
			if (errno == ENOBUFS || errno == EAGAIN) {
				long now = now_ms();
				if (refused_since == 0) {
					refused_since = now;
				} else if (now - refused_since > stuck_ms) {
					atomic_fetch_add(&stuck, 1);
					if (errno == ENOBUFS)
						atomic_fetch_add(&stuckcong, 1);
					goto out;
				}
			}
			if (nonblock && errno == EAGAIN) {
				struct pollfd p = {.fd = fd, .events = POLLOUT};
				poll(&p, 1, 100);
				continue;
			}
			if (errno == ENOBUFS || errno == EINTR || errno == EAGAIN) {
				if (atomic_load(&stop_sending))
					goto out;
				usleep(2000);
				continue;
			}
			atomic_fetch_add(&senderr, 1);
			goto out;
		}
		if (pace_us > 0)
			usleep(pace_us);
	}
out:
	close(fd);
	atomic_fetch_add(&senders_done, 1);
	return NULL;
}

static unsigned char *seen[MAXSENDERS];
static long maxseq[MAXSENDERS], unique_rx, dups, reorders, corrupt;


static void *stdin_watch(void *arg)
{
	(void)arg;
	char b[64];
	while (read(0, b, sizeof(b)) > 0)
		;
	atomic_store(&stop_sending, 1);
	return NULL;
}

static int parse_addr(const char *s, struct sockaddr_in *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	return inet_pton(AF_INET, s, &sa->sin_addr) == 1 ? 0 : -1;
}

/* parse_pair fills me and to from local and peer (one family), to's port
 * set to port; it returns the address length, or 0 if they do not parse. */
static socklen_t parse_pair(const char *local, const char *peer, int port,
			    struct sockaddr_storage *me, struct sockaddr_storage *to)
{
	memset(me, 0, sizeof(*me));
	memset(to, 0, sizeof(*to));
	if (strchr(local, ':')) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)me, *b = (struct sockaddr_in6 *)to;
		a->sin6_family = b->sin6_family = AF_INET6;
		if (inet_pton(AF_INET6, local, &a->sin6_addr) != 1 || inet_pton(AF_INET6, peer, &b->sin6_addr) != 1)
			return 0;
		b->sin6_port = htons(port);
		return sizeof(struct sockaddr_in6);
	}
	struct sockaddr_in *a = (struct sockaddr_in *)me, *b = (struct sockaddr_in *)to;
	a->sin_family = b->sin_family = AF_INET;
	if (inet_pton(AF_INET, local, &a->sin_addr) != 1 || inet_pton(AF_INET, peer, &b->sin_addr) != 1)
		return 0;
	b->sin_port = htons(port);
	return sizeof(struct sockaddr_in);
}

/* congestion_probe is probe mode (see the top of the file). */
static int congestion_probe(const char *local, const char *peer, int port)
{
	struct sockaddr_storage me, to;
	socklen_t len = parse_pair(local, peer, port, &me, &to);
	if (len == 0)
		return 2;
	enter_sendns();
	int fd = socket(AF_RDS, SOCK_SEQPACKET, 0);
	if (fd < 0)
		die("socket(AF_RDS)");
	if (bind(fd, (struct sockaddr *)&me, len) < 0)
		die("bind");
	if (sendto(fd, NULL, 0, MSG_DONTWAIT, (struct sockaddr *)&to, len) == 0)
		printf("RDSFAULT-PROBE|result=sent\n");
	else if (errno == ENOBUFS)
		printf("RDSFAULT-PROBE|result=congested\n");
	else
		printf("RDSFAULT-PROBE|result=error|errno=%d|error=%s\n", errno, strerror(errno));
	close(fd);
	return 0;
}

#define MAXPING 256

/* path_ping is ping mode (see the top of the file). */
static int path_ping(const char *local, const char *peer, int n, int limit_ms)
{
	struct sockaddr_storage me, to;
	socklen_t len = parse_pair(local, peer, 0, &me, &to);
	if (len == 0)
		return 2;
	enter_sendns();
	struct pollfd p[MAXPING];
	long last_sent[MAXPING];
	int answered = 0;
	long start = now_ms(), slowest = 0;
	for (int i = 0; i < n; i++) {
		p[i].fd = socket(AF_RDS, SOCK_SEQPACKET, 0);
		if (p[i].fd < 0)
			die("socket(AF_RDS)");
		if (bind(p[i].fd, (struct sockaddr *)&me, len) < 0)
			die("bind");
		p[i].events = POLLIN;
		last_sent[i] = 0;
	}
	for (;;) {
		long now = now_ms();
		if (answered == n || now - start >= limit_ms)
			break;
		for (int i = 0; i < n; i++) {
			if (p[i].fd >= 0 && (last_sent[i] == 0 || now - last_sent[i] >= 1000)) {
				/* A refused ping (congestion, a full send buffer) is
				 * simply sent again a second later. */
				sendto(p[i].fd, NULL, 0, MSG_DONTWAIT, (struct sockaddr *)&to, len);
				last_sent[i] = now;
			}
		}
		if (poll(p, n, 100) < 0 && errno != EINTR)
			die("poll");
		for (int i = 0; i < n; i++) {
			if (p[i].fd < 0 || !(p[i].revents & POLLIN))
				continue;
			struct sockaddr_storage from;
			socklen_t fl = sizeof(from);
			char b[64];
			ssize_t r = recvfrom(p[i].fd, b, sizeof(b), MSG_DONTWAIT, (struct sockaddr *)&from, &fl);
			if (r != 0 || fl == 0) /* a pong is empty and has a sender */
				continue;
			int port = from.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&from)->sin6_port
							       : ((struct sockaddr_in *)&from)->sin_port;
			if (port != 0)
				continue;
			close(p[i].fd);
			p[i].fd = -1; /* poll ignores it from now on */
			answered++;
			long took = now_ms() - start;
			if (took > slowest)
				slowest = took;
		}
	}
	for (int i = 0; i < n; i++)
		if (p[i].fd >= 0)
			close(p[i].fd);
	printf("RDSFAULT-PING|sockets=%d|answered=%d|slowest_ms=%ld\n", n, answered, slowest);
	return 0;
}

int main(int argc, char **argv)
{
	const char *netns = NULL;
	const char *local_arg = NULL, *peer_arg = NULL;
	int probe_port = 0, ping_sockets = 0, limit_ms = 15000;
	int have_local = 0, have_peer = 0;
	for (int i = 1; i < argc; i++) {
		char *a = argv[i];
		if (!strncmp(a, "local=", 6))
			local_arg = a + 6, have_local = parse_addr(a + 6, &local_sa) == 0;
		else if (!strncmp(a, "peer=", 5))
			peer_arg = a + 5, have_peer = parse_addr(a + 5, &peer_sa) == 0;
		else if (!strncmp(a, "probe=", 6))
			probe_port = atoi(a + 6);
		else if (!strncmp(a, "ping=", 5))
			ping_sockets = atoi(a + 5);
		else if (!strncmp(a, "limit_ms=", 9))
			limit_ms = atoi(a + 9);
		else if (!strncmp(a, "port=", 5))
			port_base = atoi(a + 5);
		else if (!strncmp(a, "netns=", 6))
			netns = a + 6;
		else if (!strncmp(a, "senders=", 8))
			nsenders = atoi(a + 8);
		else if (!strncmp(a, "pace_us=", 8))
			pace_us = atoi(a + 8);
		else if (!strncmp(a, "idle_ms=", 8))
			idle_ms = atoi(a + 8);
		else if (!strncmp(a, "count=", 6))
			count = atol(a + 6);
		else if (!strncmp(a, "sendns=", 7))
			sendns = a + 7;
		else if (!strncmp(a, "nonblock=", 9))
			nonblock = atoi(a + 9);
		else if (!strncmp(a, "stuck_ms=", 9))
			stuck_ms = atoi(a + 9);
		else {
			fprintf(stderr, "rdsfault-c: unknown argument %s\n", a);
			return 2;
		}
	}
	if (probe_port > 0 && probe_port <= 65535 && local_arg && peer_arg) {
		int rc = congestion_probe(local_arg, peer_arg, probe_port);
		if (rc == 2)
			fprintf(stderr, "rdsfault-c: probe: local= and peer= must be IPv4 or IPv6 addresses of one family\n");
		return rc;
	}
	if (ping_sockets > 0 && local_arg && peer_arg) {
		int rc = ping_sockets <= MAXPING && limit_ms > 0 ? path_ping(local_arg, peer_arg, ping_sockets, limit_ms) : 2;
		if (rc == 2)
			fprintf(stderr, "rdsfault-c: ping: ping= takes 1-%d sockets, limit_ms= a positive time, local= and peer= IPv4 or IPv6 addresses of one family\n", MAXPING);
		return rc;
	}
	if (!have_local || !have_peer || port_base <= 0 || port_base > 65535 - MAXSENDERS ||
	    nsenders < 1 || nsenders > MAXSENDERS) {
		fprintf(stderr, "usage: rdsfault-c local=ADDR peer=ADDR port=BASE [netns=PATH] [sendns=PATH] [senders=1-8] [pace_us=N] [idle_ms=N] [count=N] [nonblock=0|1] [stuck_ms=N]\n");
		return 2;
	}
	peer_sa.sin_port = htons(port_base);

	/* The receiver lives in the peer namespace; the senders in ours. */
	int self = open("/proc/thread-self/ns/net", O_RDONLY);
	if (self < 0)
		die("open own netns");
	if (netns) {
		int ns = open(netns, O_RDONLY);
		if (ns < 0 || setns(ns, CLONE_NEWNET) < 0)
			die(netns);
		close(ns);
	}
	rfd = rds_socket(&peer_sa);
	if (netns && setns(self, CLONE_NEWNET) < 0)
		die("setns back");
	close(self);

	for (int i = 0; i < nsenders; i++) {
		seen[i] = calloc(MAXSEQ, 1);
		if (!seen[i])
			die("calloc");
		maxseq[i] = -1;
	}
	pthread_t th[MAXSENDERS], w;
	if (count == 0) {
		pthread_create(&w, NULL, stdin_watch, NULL);
		pthread_detach(w);
	}
	for (int i = 0; i < nsenders; i++)
		pthread_create(&th[i], NULL, sender, (void *)(intptr_t)i);

	static unsigned char buf[1 << 16];
	long last = now_ms();
	int joined = 0;
	for (;;) {
		if (!joined && (atomic_load(&stop_sending) || atomic_load(&senders_done) == nsenders)) {
			for (int i = 0; i < nsenders; i++)
				pthread_join(th[i], NULL);
			joined = 1;
			last = now_ms();
		}
		if (joined) {
			long want = 0;
			for (int i = 0; i < nsenders; i++)
				want += atomic_load(&accepted[i]);
			if (unique_rx >= want || now_ms() - last > idle_ms)
				break;
		}
		struct pollfd p = {.fd = rfd, .events = POLLIN};
		if (poll(&p, 1, 100) <= 0)
			continue;
		ssize_t n = recv(rfd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			die("recv");
		}
		last = now_ms();
		if (n < HDR + 4 || get32(buf) != MAGIC) {
			corrupt++;
			continue;
		}
		uint32_t id = get32(buf + 4), len = get32(buf + 16);
		uint64_t seq = (uint64_t)get32(buf + 8) << 32 | get32(buf + 12);
		if (id >= (uint32_t)nsenders || seq >= MAXSEQ || (size_t)n != HDR + len + 4 ||
		    get32(buf + HDR + len) != sum(buf, HDR + len)) {
			corrupt++;
			continue;
		}
		if (seen[id][seq]) {
			dups++;
			continue;
		}
		seen[id][seq] = 1;
		unique_rx++;
		if ((long)seq < maxseq[id])
			reorders++;
		else
			maxseq[id] = seq;
	}
	long acc = 0, lost = 0, blocks = 0;
	for (int i = 0; i < nsenders; i++) {
		long a = atomic_load(&accepted[i]);
		acc += a;
		int in_gap = 0;
		for (long s = 0; s < a; s++) {
			if (!seen[i][s]) {
				lost++;
				if (!in_gap)
					blocks++;
				in_gap = 1;
			} else {
				in_gap = 0;
			}
		}
	}
	printf("RDSFAULT|accepted=%ld|received=%ld|lost=%ld|dup=%ld|reordered=%ld|corrupt=%ld|blocks=%ld|senderr=%ld|stuck=%ld|stuckcong=%ld\n",
	       acc, unique_rx, lost, dups, reorders, corrupt, blocks, atomic_load(&senderr), atomic_load(&stuck), atomic_load(&stuckcong));
	return 0;
}
