/*
 * wakecode: what the emulated VM charges a process for the code it runs
 * after each wake-up; the C side of rdsbench's "What the VM charges for
 * code" (integration/internal/bench/wakecode_linux.go is the Go side, with
 * the same protocol and the same functions).
 *
 *   wakecode-c MODE K N
 *
 * Two processes, this one and a child it forks, pass one byte back and
 * forth over two pipes; each wakes for every byte, as the two ends of a
 * request/response exchange do. After each wake-up both run K calls of
 * small functions before they answer: MODE "repeated" calls one function K
 * times, "distinct" calls K different functions once each (K at most
 * NFUNCS), and "inlined" runs the bodies of all NFUNCS functions written
 * one after another in one function, without a call between them (K 0 or
 * NFUNCS): the same code as "distinct" without its calls and returns.
 * After 2000 messages of warm-up this process measures its own user and
 * system CPU time (getrusage) and the wall time over N more, and prints
 * them per message:
 *
 *   RESULT user_us=U sys_us=S wall_us=W msgs=N
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* NFUNCS functions f100 ... f499, each a test and an add or an xor. */
#define F(i) static __attribute__((noinline)) long f##i(long x) { return (x & ((i) % 7 + 1)) ? x + (i) : x ^ ((i) * 17); }
#define F10(p) F(p##0) F(p##1) F(p##2) F(p##3) F(p##4) F(p##5) F(p##6) F(p##7) F(p##8) F(p##9)
#define F100(p) F10(p##0) F10(p##1) F10(p##2) F10(p##3) F10(p##4) F10(p##5) F10(p##6) F10(p##7) F10(p##8) F10(p##9)
F100(1) F100(2) F100(3) F100(4)

#define T(i) f##i,
#define T10(p) T(p##0) T(p##1) T(p##2) T(p##3) T(p##4) T(p##5) T(p##6) T(p##7) T(p##8) T(p##9)
#define T100(p) T10(p##0) T10(p##1) T10(p##2) T10(p##3) T10(p##4) T10(p##5) T10(p##6) T10(p##7) T10(p##8) T10(p##9)
static long (*const funcs[])(long) = {T100(1) T100(2) T100(3) T100(4)};
#define NFUNCS ((long)(sizeof(funcs) / sizeof(funcs[0])))

/* inlined runs the bodies of f100 ... f499 one after another, each once,
 * with no call between them. The empty asm keeps gcc from merging them. */
#define B(i) x = (x & ((i) % 7 + 1)) ? x + (i) : x ^ ((i) * 17); __asm__ volatile("" : "+r"(x));
#define B10(p) B(p##0) B(p##1) B(p##2) B(p##3) B(p##4) B(p##5) B(p##6) B(p##7) B(p##8) B(p##9)
#define B100(p) B10(p##0) B10(p##1) B10(p##2) B10(p##3) B10(p##4) B10(p##5) B10(p##6) B10(p##7) B10(p##8) B10(p##9)
static __attribute__((noinline)) long inlined(long x)
{
	B100(1) B100(2) B100(3) B100(4)
	return x;
}

enum { WARM = 2000 };

static volatile long sink;
static int distinct, inline_all;

static void work(long k)
{
	long x = 1;
	if (inline_all) {
		if (k)
			x = inlined(x);
	} else {
		for (long i = 0; i < k; i++)
			x = funcs[distinct ? i : 0](x);
	}
	sink += x;
}

static int xfer(int fd, int write_it)
{
	char c = 0;
	ssize_t n = write_it ? write(fd, &c, 1) : read(fd, &c, 1);
	return n == 1 ? 0 : -1;
}

static double usec(struct timeval t) { return t.tv_sec * 1e6 + t.tv_usec; }

int main(int argc, char **argv)
{
	if (argc != 4 || (strcmp(argv[1], "repeated") && strcmp(argv[1], "distinct") && strcmp(argv[1], "inlined"))) {
		fprintf(stderr, "usage: wakecode-c repeated|distinct|inlined K N\n");
		return 2;
	}
	distinct = !strcmp(argv[1], "distinct");
	inline_all = !strcmp(argv[1], "inlined");
	long k = atol(argv[2]), n = atol(argv[3]);
	if (k < 0 || (distinct && k > NFUNCS) || (inline_all && k != 0 && k != NFUNCS) || n <= 0) {
		fprintf(stderr, "wakecode-c: K must be 0 to %ld (distinct), 0 or %ld (inlined), N positive\n", NFUNCS, NFUNCS);
		return 2;
	}
	int there[2], back[2];
	if (pipe(there) || pipe(back)) {
		perror("wakecode-c: pipe");
		return 1;
	}
	pid_t child = fork();
	if (child < 0) {
		perror("wakecode-c: fork");
		return 1;
	}
	if (child == 0) {
		close(there[1]);
		close(back[0]);
		while (xfer(there[0], 0) == 0) {
			work(k);
			if (xfer(back[1], 1))
				_exit(1);
		}
		_exit(0);
	}
	close(there[0]);
	close(back[1]);
	struct rusage r0, r1;
	struct timespec t0, t1;
	for (long i = 0; i < WARM + n; i++) {
		if (i == WARM) {
			getrusage(RUSAGE_SELF, &r0);
			clock_gettime(CLOCK_MONOTONIC, &t0);
		}
		if (xfer(there[1], 1)) {
			perror("wakecode-c: write");
			return 1;
		}
		work(k);
		if (xfer(back[0], 0)) {
			perror("wakecode-c: read");
			return 1;
		}
	}
	getrusage(RUSAGE_SELF, &r1);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	close(there[1]);
	int status;
	if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "wakecode-c: the child failed\n");
		return 1;
	}
	double wall = (t1.tv_sec - t0.tv_sec) * 1e6 + (t1.tv_nsec - t0.tv_nsec) / 1e3;
	printf("RESULT user_us=%.3f sys_us=%.3f wall_us=%.3f msgs=%ld\n", (usec(r1.ru_utime) - usec(r0.ru_utime)) / n,
	       (usec(r1.ru_stime) - usec(r0.ru_stime)) / n, wall / n, n);
	return 0;
}
