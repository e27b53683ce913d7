//go:build linux

package cli

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"runtime/pprof"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

func init() {
	register(&command{
		name:    "stress",
		summary: "load generator and meter: messages/s, MB/s, latency percentiles",
		usage:   "[flags]",
		help: `Load an RDS path and measure it, in the spirit of rds-stress. A receiver
(-listen) counts messages and answers requests; a sender (-to) runs -tasks
sockets that each keep up to -depth requests in flight.

Modes:
  rr      request/response: each request of -size bytes is answered by an
          ack of -ack-size bytes; latency is request to ack
  oneway  the sender streams messages of -size bytes with no answers,
          waiting (like a blocking socket) while the receiver's port is
          congested; the summary counts those waits

Each sender task is one goroutine with one socket: it sends until -depth
requests are unanswered, then reads an answer, as a C poll loop does, and
like it sleeps in the kernel while it waits (rdssock's way of waiting for
a read). Unless GOMAXPROCS is set, stress raises it to the number of such
goroutines (tasks, plus one per receiver port), so that each can wait
keeping its P.

A receiver reads one socket with one goroutine. With -ports N it listens
on N consecutive ports from its PORT, each with a socket and a goroutine
of its own, and a sender given the same -ports sends task i to PORT + i
mod N: with -tasks N as well, each task has a receiving goroutine of its
own, the way a C tool forks one process per task on both sides.

RDMA mode (-rdma write or -rdma read, instead of -mode; RDS/IB addresses
only): the receiver registers -depth buffers of -rdma-size bytes per sender
task once, at warm-up, from a pool, and sends their cookies; each sender
task keeps up to -depth RDMA WRITEs into (or READs from) them in flight,
each with immediate data and a completion notice tracked by a barrier
token. Without -verify the sender cycles through those buffers, as
rds-stress does; with it the receiver checks each buffer when its
immediate data arrives and hands it back with a credit. Latency is from
issuing an operation to its completion notice; the summary counts completions by status. -verify fills every
transfer with a pattern and checks the landed bytes (the receiver checks
WRITEs, the sender READs). Keep -rdma-size modest on Soft-RoCE (transfers
of 32 KiB and more were seen to stall rxe). A receiver registers at most
-rdma-max-mem bytes for all senders together, and frees the buffers of a
sender task from which nothing arrived for -rdma-idle (a sender that
crashed or hangs); both refusals are sent to the sender and logged on the
receiver's standard error, where a receiver alone also logs each
registration.

At the end each sender task tells the receiver how many messages it sent
and the receiver answers how many it counted; the summary shows both and
stress exits 1 if they differ. Latency percentiles come from a log-linear
histogram with under 1% error; the summary also shows that histogram by
powers of two (text bars, or "histogram" buckets in microseconds with
-json). On a terminal a live line is printed every
second. The role follows from the flags: -listen alone receives, -to alone
sends, both run the two ends in one process (for loopback or two
namespaces, see -listen-netns). A receiver alone runs until interrupted
(or with -once until one sender run has finished); -duration's default of
5s is the sender's and applies to it only when given explicitly.

Examples:
  rdscat stress -listen 10.0.0.2:4000                         receiver, runs until interrupted
  rdscat stress -listen 10.0.0.2:4000 -duration 1m            receiver, stops after a minute
  rdscat stress -to 10.0.0.2:4000 -tasks 4 -depth 8 -duration 10s
  rdscat stress -listen 10.0.0.2:4000 -ports 4                 receiver on ports 4000 to 4003
  rdscat stress -to 10.0.0.2:4000 -ports 4 -tasks 4 -depth 8   a task to each of them
  rdscat stress -to 10.0.0.2:4000 -mode oneway -size 64k -json
  rdscat stress -listen 127.0.0.1:4000 -to 127.0.0.1:4000 -duration 3s
  rdscat stress -listen 10.0.0.2:4000 -listen-netns peer -to 10.0.0.2:4000 -from 10.0.0.1
  rdscat stress -listen 10.0.0.2:4000 -once -json               receive one run, then exit
  rdscat stress -listen 10.22.0.2:4000 -to 10.22.0.2:4000 -from 10.22.0.1 -rdma write -rdma-size 16k -depth 8 -verify
  rdscat stress -to 10.22.0.2:4000 -rdma read -rdma-size 4k -tasks 2 -duration 10s -json`,
		setup: func(fs *flag.FlagSet) func(*env, []string) error {
			o := &stressOpts{size: 1024, ackSize: stressHeader, rdmaSize: 4096, rdmaMaxMem: rdmaMemCap, fs: fs}
			o.register(fs)
			return o.run
		},
	})
}

// stressOpts are the stress command's flags. The command is split by
// role: this file holds the flags, the wire format and run, which checks
// the flags and runs the two ends; stress_send.go is the sender,
// stress_recv.go the receiver, stress_report.go the results and
// stress_rdma.go the RDMA mode of both ends.
type stressOpts struct {
	sock        sockFlags
	listen      string
	listenNetns string
	to          string
	from        string
	mode        string
	tasks       int
	ports       int
	depth       int
	size        sizeValue
	ackSize     sizeValue
	duration    time.Duration
	count       int
	timeout     time.Duration
	warmup      time.Duration
	ready       string
	once        bool
	json        bool
	quiet       bool
	rdma        string
	rdmaSize    sizeValue
	verify      bool
	rdmaMaxMem  sizeValue
	rdmaIdle    time.Duration
	cpuprofile  string
	fs          *flag.FlagSet
}

func (o *stressOpts) register(fs *flag.FlagSet) {
	o.sock.register(fs)
	fs.StringVar(&o.listen, "listen", "", "receive on `ADDR:PORT`")
	fs.StringVar(&o.listenNetns, "listen-netns", "", "receiver's network namespace when both ends run here (default: -netns)")
	fs.StringVar(&o.to, "to", "", "send to the receiver at `ADDR:PORT`")
	fs.StringVar(&o.from, "from", "", "sender's source `ADDR` (default: the route's source address)")
	fs.StringVar(&o.mode, "mode", "rr", "rr (request/response) or oneway")
	fs.IntVar(&o.tasks, "tasks", 1, "sender sockets running in parallel")
	fs.IntVar(&o.ports, "ports", 1, "the receiver's consecutive ports from its PORT: it listens on each with a socket and goroutine of its own, and sender task i sends to PORT + i mod `N` (use the same N on both sides; -tasks N spreads the receiving work over CPUs as one process per task does)")
	fs.IntVar(&o.depth, "depth", 1, "requests in flight per task (rr)")
	fs.Var(&o.size, "size", fmt.Sprintf("request or message size in `BYTES` (%d to 1m)", stressHeader))
	fs.Var(&o.ackSize, "ack-size", "ack size in `BYTES` (rr)")
	fs.DurationVar(&o.duration, "duration", 5*time.Second, "sender: how long to send; 0 with -count: until -count. A receiver alone (-listen without -to) ignores the default and runs until interrupted or -once; given explicitly, it stops after `DURATION`")
	fs.IntVar(&o.count, "count", 0, "messages per task; stops the task before -duration when reached (0: no limit)")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Second, "how long to wait for acks and the receiver's count at the end")
	fs.DurationVar(&o.warmup, "warmup", 5*time.Second, "sender: RDS-ping the receiver's host first until it answers, for up to this long (0: don't)")
	fs.StringVar(&o.ready, "ready", "", "receiver: write the bound ADDR:PORT to `FILE` once bound (for scripts)")
	fs.BoolVar(&o.once, "once", false, "receiver: exit after the first sender run has finished")
	fs.BoolVar(&o.json, "json", false, "print the summary as JSON")
	fs.BoolVar(&o.quiet, "q", false, "no live line even on a terminal")
	fs.StringVar(&o.rdma, "rdma", "", "RDMA mode instead of -mode: `write` or read with immediate data (RDS/IB only)")
	fs.Var(&o.rdmaSize, "rdma-size", "bytes per RDMA operation in RDMA mode (`BYTES`, 1 to 1m)")
	fs.BoolVar(&o.verify, "verify", false, "RDMA mode: fill each transfer with a pattern and check the landed bytes")
	fs.Var(&o.rdmaMaxMem, "rdma-max-mem", "receiver, RDMA mode: most `BYTES` registered for all senders together (0: no limit); a sender task that would exceed it is refused")
	fs.DurationVar(&o.rdmaIdle, "rdma-idle", 30*time.Second, "receiver, RDMA mode: free a sender task's buffers when no message of it arrived for `DURATION` (0: never)")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of the run to `FILE` (for go tool pprof, or as a default.pgo for a profile-guided build)")
}

// The stress wire format: a fixed header at the start of every message,
// the rest of the message is padding.
const (
	stressMagic  = 0x52445354 // "RDST"
	stressHeader = 32

	typeData   = 1 // oneway message
	typeReq    = 2 // request: answer with an ack of aux bytes
	typeAck    = 3 // answer to a request: seq and ts echoed
	typeFin    = 4 // task finished: seq is the number it sent, aux the task count
	typeFinAck = 5 // answer to fin: seq is the number counted, aux the sequence errors
)

type stressHdr struct {
	typ  uint8
	task uint16
	run  uint32
	seq  uint64
	ts   int64
	aux  uint32
}

func (h *stressHdr) put(b []byte) {
	binary.BigEndian.PutUint32(b[0:], stressMagic)
	b[4] = h.typ
	b[5] = 0
	binary.BigEndian.PutUint16(b[6:], h.task)
	binary.BigEndian.PutUint32(b[8:], h.run)
	binary.BigEndian.PutUint32(b[12:], h.aux)
	binary.BigEndian.PutUint64(b[16:], h.seq)
	binary.BigEndian.PutUint64(b[24:], uint64(h.ts))
}

func (h *stressHdr) parse(b []byte) bool {
	if len(b) < stressHeader || binary.BigEndian.Uint32(b) != stressMagic {
		return false
	}
	h.typ = b[4]
	h.task = binary.BigEndian.Uint16(b[6:])
	h.run = binary.BigEndian.Uint32(b[8:])
	h.aux = binary.BigEndian.Uint32(b[12:])
	h.seq = binary.BigEndian.Uint64(b[16:])
	h.ts = int64(binary.BigEndian.Uint64(b[24:]))
	return true
}

// monoNow is CLOCK_MONOTONIC in nanoseconds: comparable between processes
// on one host. It reads the clock once through a system call (x/sys/unix
// has no vDSO path) and after that through the runtime's monotonic clock,
// which is the same clock read through the vDSO: stress stamps every
// message, and a system call per stamp showed in its CPU profile.
func monoNow() int64 { return monoBase.ns + int64(time.Since(monoBase.t)) }

var monoBase = func() (b struct {
	t  time.Time
	ns int64
}) {
	var ts unix.Timespec
	b.t = time.Now()
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	b.ns = ts.Nano()
	return b
}()

func (o *stressOpts) run(e *env, args []string) (err error) {
	if err := o.check(args); err != nil {
		return err
	}
	lap, dst, err := o.addresses()
	if err != nil {
		return err
	}
	if o.cpuprofile != "" {
		stop, perr := startCPUProfile(o.cpuprofile)
		if perr != nil {
			return perr
		}
		defer func() { // err is run's result: a failed close of the profile is the run's error
			if serr := stop(); err == nil {
				err = serr
			}
		}()
	}
	if os.Getenv("GOMAXPROCS") == "" {
		if n := o.procs(); n > runtime.GOMAXPROCS(0) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(n))
		}
	}
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()

	var recv *receiver
	if o.listen != "" {
		if recv, err = o.newReceiver(e, lap); err != nil {
			return err
		}
		defer recv.close()
	}
	var snd *sender
	if o.to != "" {
		if snd, err = o.newSender(dst); err != nil {
			return err
		}
		defer snd.close()
	}
	rep, sendErr, recvErr := o.runEnds(ctx, cancel, e, snd, recv)
	if err := o.writeSummary(e, rep); err != nil {
		return err
	}
	if sendErr != nil {
		return sendErr
	}
	if recvErr != nil {
		return recvErr
	}
	return rep.failure()
}

// startCPUProfile starts the Go CPU profiler writing to path; stop ends
// it and closes the file.
func startCPUProfile(path string) (stop func() error, err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("-cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("-cpuprofile: %w", err)
	}
	return func() error {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			return fmt.Errorf("-cpuprofile: %w", err)
		}
		return nil
	}, nil
}

// check validates the flags that need no socket.
func (o *stressOpts) check(args []string) error {
	if len(args) > 0 {
		return usagef("stress takes flags only, got %q", args[0])
	}
	if o.listen == "" && o.to == "" {
		return usagef("give -listen ADDR:PORT (receiver), -to ADDR:PORT (sender), or both")
	}
	if err := o.checkLimits(); err != nil {
		return err
	}
	if err := o.checkRDMA(); err != nil {
		return err
	}
	if err := checkMessageSize("-size", int(o.size)); err != nil {
		return err
	}
	return checkMessageSize("-ack-size", int(o.ackSize))
}

// checkLimits checks the mode, the counts and sizes, and the flags that
// belong to one role.
func (o *stressOpts) checkLimits() error {
	switch {
	case o.mode != "rr" && o.mode != "oneway":
		return usagef("bad -mode %q: want rr or oneway", o.mode)
	case o.tasks < 1 || o.tasks > 1024:
		return usagef("-tasks %d: want 1 to 1024", o.tasks)
	case o.ports < 1 || o.ports > 1024:
		return usagef("-ports %d: want 1 to 1024", o.ports)
	case o.depth < 1 || o.depth > 4096:
		return usagef("-depth %d: want 1 to 4096", o.depth)
	case o.size < stressHeader || o.ackSize < stressHeader:
		return usagef("-size and -ack-size must be at least %d bytes (the stress header)", stressHeader)
	case o.duration < 0 || o.count < 0 || o.timeout <= 0:
		return usagef("-duration and -count must not be negative, -timeout must be positive")
	case o.to != "" && o.duration == 0 && o.count == 0:
		return usagef("the sender needs -duration or -count to know when to stop")
	case o.listenNetns != "" && (o.listen == "" || o.to == ""):
		return usagef("-listen-netns is for running both ends in one process (-listen and -to)")
	}
	return nil
}

// addresses parses -listen and -to; an address not given stays invalid.
func (o *stressOpts) addresses() (lap, dst netip.AddrPort, err error) {
	if o.listen != "" {
		if lap, err = parseAddrPort("-listen address", o.listen); err != nil {
			return lap, dst, err
		}
	}
	if o.to != "" {
		if dst, err = parseAddrPort("-to address", o.to); err != nil {
			return lap, dst, err
		}
	}
	if err := o.checkPorts(lap, dst); err != nil {
		return lap, dst, err
	}
	if o.rdma != "" {
		for _, a := range []netip.AddrPort{lap, dst} {
			if a.IsValid() && a.Addr().Unmap().IsLoopback() {
				return lap, dst, usagef("-rdma needs an IB address (RDS_TRANS_IB) on an RDMA device: %v is loopback, which RDS carries over its loop transport", a.Addr())
			}
		}
	}
	return lap, dst, nil
}

// checkPorts checks that -ports consecutive ports fit after the -listen
// and -to ports, and that a receiver on several ports names its first.
func (o *stressOpts) checkPorts(lap, dst netip.AddrPort) error {
	if o.ports == 1 {
		return nil
	}
	if lap.IsValid() && lap.Port() == 0 {
		return usagef("-ports %d needs the receiver's first port: -listen ADDR:PORT with a PORT other than 0", o.ports)
	}
	for _, a := range []netip.AddrPort{lap, dst} {
		if a.IsValid() && int(a.Port())+o.ports-1 > 65535 {
			return usagef("-ports %d from port %d goes past 65535", o.ports, a.Port())
		}
	}
	return nil
}

// procs is the GOMAXPROCS a run needs: one P per task and per receiver
// port, so that each of their reads can sleep in the kernel keeping its P
// (see rdssock's kwait_linux.go; the last one to take the last P sleeps
// there 250 us at most, then parks in the runtime poller). No P more: an
// idle P makes the runtime wake a thread to look for work whenever a
// goroutine becomes runnable, which in the test VM cost rr tcp 4x8 about
// 0.1 futex calls and 0.1 context switches per request on each side, and
// CPU per request of 0.98 and 0.90 (64 B and 1 KiB requests; medians of 8
// paired rounds, rdsbench -env-a GOMAXPROCS=5 -env-b GOMAXPROCS=4).
func (o *stressOpts) procs() int {
	busy := 0
	if o.to != "" {
		busy += o.tasks
	}
	if o.listen != "" {
		busy += o.ports
	}
	return busy
}

// runEnds runs the receiver (in its own goroutine) and the sender (in
// this one, with one goroutine per task) until both are done, with the
// live line on a terminal, and returns their report and errors.
func (o *stressOpts) runEnds(ctx context.Context, cancel context.CancelFunc, e *env, snd *sender, recv *receiver) (rep *stressReport, sendErr, recvErr error) {
	rep = &stressReport{}
	var wg sync.WaitGroup
	recvDone := make(chan error, 1)
	if recv != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			recvDone <- recv.serve(ctx, e, o.receiverDuration())
		}()
	}
	stopLive := make(chan struct{})
	if !o.quiet && !o.json && isTerminal(e.stdout) {
		go liveLines(e.stdout, snd, recv, stopLive)
	}
	if snd != nil {
		sendErr = snd.run(ctx, e)
		rep.Sender = snd.report()
	}
	if recv != nil {
		if snd != nil {
			// Both ends here: the sender is done and has its count, so
			// the receiver stops once it has answered every task's fin.
			recv.waitFinished(o.timeout)
			cancel()
		}
		recvErr = <-recvDone
		rep.Receiver = recv.report()
	}
	close(stopLive)
	wg.Wait()
	return rep, sendErr, recvErr
}

// writeSummary writes the summary: JSON with -json, else the text report.
func (o *stressOpts) writeSummary(e *env, rep *stressReport) error {
	if !o.json {
		printStress(e.stdout, rep)
		return nil
	}
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// receiverDuration is how long the receiver runs by itself: 0 (until
// interrupted, or -once) unless -duration was given on the command line
// for a receiver alone. -duration's default is the sender's, and with both
// ends in one process the receiver stops when the sender has finished.
func (o *stressOpts) receiverDuration() time.Duration {
	if o.to != "" || o.fs == nil {
		return 0
	}
	given := false
	o.fs.Visit(func(f *flag.Flag) { given = given || f.Name == "duration" })
	if !given {
		return 0
	}
	return o.duration
}
