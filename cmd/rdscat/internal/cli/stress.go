//go:build linux

package cli

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/go-rds/rds/cmd/rdscat/internal/hist"
	"github.com/go-rds/rds/rdmaops"
	"github.com/go-rds/rds/rdssock"
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
requests are unanswered, then reads an answer, as a C poll loop does.
Unless GOMAXPROCS is set, stress runs with as many Ps as it has such
goroutines (tasks, plus one for a receiver), at most the CPU count.

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

type stressOpts struct {
	sock        sockFlags
	listen      string
	listenNetns string
	to          string
	from        string
	mode        string
	tasks       int
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
// on one host.
func monoNow() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// stressReport is the JSON summary: the sender and/or receiver part.
type stressReport struct {
	Sender   *senderReport   `json:"sender,omitempty"`
	Receiver *receiverReport `json:"receiver,omitempty"`
}

type senderReport struct {
	Mode            string            `json:"mode"`
	Source          string            `json:"source"`
	Dest            string            `json:"dest"`
	Transport       string            `json:"transport"`
	Tasks           int               `json:"tasks"`
	Depth           int               `json:"depth"`
	Size            int               `json:"size"`
	AckSize         int               `json:"ack_size,omitempty"`
	Seconds         float64           `json:"seconds"`
	Sent            uint64            `json:"sent"`
	SentBytes       uint64            `json:"sent_bytes"`
	Acked           uint64            `json:"acked"`
	ReceiverCounted uint64            `json:"receiver_counted"`
	CountsMatch     bool              `json:"counts_match"`
	Congested       uint64            `json:"congested_retries"`
	Errors          uint64            `json:"errors"`
	MsgsPerSec      float64           `json:"msgs_per_sec"`
	MBPerSec        float64           `json:"mb_per_sec"`
	Latency         *latencyReport    `json:"latency_us,omitempty"`
	RDMA            *rdmaSenderReport `json:"rdma,omitempty"`
}

type latencyReport struct {
	Count  uint64  `json:"count"`
	Min    float64 `json:"min"`
	P50    float64 `json:"p50"`
	P90    float64 `json:"p90"`
	P99    float64 `json:"p99"`
	P999   float64 `json:"p99_9"`
	Max    float64 `json:"max"`
	Mean   float64 `json:"mean"`
	StdDev float64 `json:"stddev"`
	// Histogram groups the samples by powers of two of nanoseconds; its
	// counts sum to Count.
	Histogram []latencyBucket `json:"histogram"`
}

type receiverReport struct {
	Address       string              `json:"address"`
	Transport     string              `json:"transport"`
	Seconds       float64             `json:"seconds"`
	Received      uint64              `json:"received"`
	ReceivedBytes uint64              `json:"received_bytes"`
	Acks          uint64              `json:"acks_sent"`
	Runs          int                 `json:"runs"`
	TasksFinished int                 `json:"tasks_finished"`
	SeqErrors     uint64              `json:"seq_errors"`
	Foreign       uint64              `json:"foreign"`
	MsgsPerSec    float64             `json:"msgs_per_sec"`
	MBPerSec      float64             `json:"mb_per_sec"`
	RDMA          *rdmaReceiverReport `json:"rdma,omitempty"`
}

func (o *stressOpts) run(e *env, args []string) error {
	if len(args) > 0 {
		return usagef("stress takes flags only, got %q", args[0])
	}
	if o.listen == "" && o.to == "" {
		return usagef("give -listen ADDR:PORT (receiver), -to ADDR:PORT (sender), or both")
	}
	switch {
	case o.mode != "rr" && o.mode != "oneway":
		return usagef("bad -mode %q: want rr or oneway", o.mode)
	case o.tasks < 1 || o.tasks > 1024:
		return usagef("-tasks %d: want 1 to 1024", o.tasks)
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
	if err := o.checkRDMA(); err != nil {
		return err
	}
	if err := checkMessageSize("-size", int(o.size)); err != nil {
		return err
	}
	if err := checkMessageSize("-ack-size", int(o.ackSize)); err != nil {
		return err
	}
	var lap, dst netip.AddrPort
	var err error
	if o.listen != "" {
		if lap, err = parseAddrPort("-listen address", o.listen); err != nil {
			return err
		}
	}
	if o.to != "" {
		if dst, err = parseAddrPort("-to address", o.to); err != nil {
			return err
		}
	}
	if o.rdma != "" {
		for _, a := range []netip.AddrPort{lap, dst} {
			if a.IsValid() && a.Addr().Unmap().IsLoopback() {
				return usagef("-rdma needs an IB address (RDS_TRANS_IB) on an RDMA device: %v is loopback, which RDS carries over its loop transport", a.Addr())
			}
		}
	}

	if os.Getenv("GOMAXPROCS") == "" {
		// One goroutine per task, and one for the receiver, do the work;
		// more Ps than that only make the scheduler wake idle threads to
		// look for work each time a task's message arrives.
		busy := 0
		if o.to != "" {
			busy += o.tasks
		}
		if o.listen != "" {
			busy++
		}
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(min(busy, runtime.NumCPU())))
	}
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	live := !o.quiet && !o.json && isTerminal(e.stdout)
	rep := &stressReport{}

	var recv *receiver
	if o.listen != "" {
		sf := o.sock
		if o.listenNetns != "" {
			sf.netns = o.listenNetns
		}
		big := max(int(o.size), int(o.ackSize))
		c, err := sf.listen(lap, func(cfg *rdssock.Config) {
			if cfg.SendBuffer == 0 {
				cfg.SendBuffer = bufferFor(big)
			}
			if cfg.ReceiveBuffer == 0 {
				cfg.ReceiveBuffer = max(4*big, 1<<20)
			}
			cfg.ForceBuffers = cfg.ForceBuffers || isRoot()
		})
		if err != nil {
			return err
		}
		defer c.Close()
		if o.rdma != "" {
			if tr, err := c.Transport(); err != nil || tr != rdssock.TransportIB {
				return rdmaTransportError(c.LocalAddrPort(), tr)
			}
		}
		if o.ready != "" {
			if err := writeFileAtomic(o.ready, c.LocalAddrPort().String()+"\n"); err != nil {
				return err
			}
		}
		recv = &receiver{c: c, once: o.once || o.to != "", start: time.Now(), runs: map[uint32]*recvRun{}, streams: map[streamKey]*recvStream{}, rdma: map[streamKey]*rdmaStream{},
			rdmaMaxMem: int64(o.rdmaMaxMem), rdmaIdle: o.rdmaIdle, log: e.stderr, standalone: o.to == ""}
		if o.to == "" {
			tr, _ := c.Transport()
			if !o.json {
				fmt.Fprintf(e.stdout, "stress receiver on %v (transport %v)\n", c.LocalAddrPort(), tr)
			}
		}
	}
	var snd *sender
	if o.to != "" {
		snd, err = o.newSender(dst)
		if err != nil {
			return err
		}
		defer snd.close()
	}

	var wg sync.WaitGroup
	recvErr := make(chan error, 1)
	if recv != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			recvErr <- recv.serve(ctx, e, o.receiverDuration())
		}()
	}
	stopLive := make(chan struct{})
	if live {
		go liveLines(e.stdout, snd, recv, stopLive)
	}
	var sendErr error
	if snd != nil {
		sendErr = snd.run(ctx, e)
		rep.Sender = snd.report()
	}
	var rerr error
	if recv != nil {
		if snd != nil {
			// Both ends here: the sender is done and has its count, so
			// the receiver stops once it has answered every task's fin.
			recv.waitFinished(o.timeout)
			cancel()
		}
		rerr = <-recvErr
		rep.Receiver = recv.report()
	}
	close(stopLive)
	wg.Wait()

	if o.json {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		printStress(e.stdout, rep)
	}
	if sendErr != nil {
		return sendErr
	}
	if rerr != nil {
		return rerr
	}
	if rep.Sender != nil && !rep.Sender.CountsMatch {
		if rep.Sender.RDMA != nil {
			return fmt.Errorf("the receiver counted %d RDMA operations but %d completed", rep.Sender.ReceiverCounted, rep.Sender.Acked)
		}
		return fmt.Errorf("the receiver counted %d messages but %d were sent", rep.Sender.ReceiverCounted, rep.Sender.Sent)
	}
	if s := rep.Sender; s != nil && s.RDMA != nil && (s.RDMA.VerifyErrors > 0 || s.RDMA.ReceiverVerifyErrors > 0) {
		return fmt.Errorf("data verification failed: %d READs and %d WRITEs held the wrong bytes", s.RDMA.VerifyErrors, s.RDMA.ReceiverVerifyErrors)
	}
	if r := rep.Receiver; r != nil && r.RDMA != nil && r.RDMA.VerifyErrors > 0 {
		return fmt.Errorf("data verification failed: %d RDMA WRITEs landed with the wrong bytes", r.RDMA.VerifyErrors)
	}
	return nil
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// ---- receiver ----

type streamKey struct {
	run  uint32
	task uint16
	from netip.AddrPort
}

type recvStream struct {
	count     uint64
	next      uint64
	seqErrors uint64
	finished  bool
}

type recvRun struct {
	tasks    int // from the fin messages
	finished int
}

type receiver struct {
	c     *rdssock.Conn
	rc    *rdmaops.Conn // RDMA mode: registers the pools' buffers
	once  bool
	start time.Time

	msgs, bytes, acks atomic.Uint64 // live counters

	mu       sync.Mutex
	runs     map[uint32]*recvRun
	streams  map[streamKey]*recvStream
	finished int
	seqErrs  uint64
	foreign  uint64
	rdma     map[streamKey]*rdmaStream
	rejected uint64

	// RDMA mode: registered memory and its limits (see stress_rdma.go).
	rdmaMu     sync.Mutex // serialises the streams' pools: the serve loop and the idle sweep
	rdmaMaxMem int64
	rdmaIdle   time.Duration
	regBytes   int64 // registered now, over all streams (r.mu)
	regPeak    int64 // most registered at once (r.mu)
	idleFreed  uint64
	log        io.Writer // the receiver's notes: registrations, refusals and idle frees
	standalone bool      // no sender in this process: log registrations too
	end        time.Time
	allDone    chan struct{} // closed when the first run has finished
	doneOnce   sync.Once
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

// serve receives until ctx is done, -once is satisfied, or duration (when
// positive) has passed.
func (r *receiver) serve(ctx context.Context, e *env, duration time.Duration) error {
	r.mu.Lock()
	if r.allDone == nil {
		r.allDone = make(chan struct{})
	}
	r.mu.Unlock()
	if duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, duration)
		defer cancel()
	}
	buf := make([]byte, maxMessage+1)
	ack := make([]byte, maxMessage)
	sweepDone := r.startIdleSweep(ctx)
	defer func() {
		sweepDone()
		r.mu.Lock()
		r.end = time.Now()
		r.mu.Unlock()
		r.closeRDMA(nil)
	}()
	for {
		n, _, _, from, err := r.c.ReadMsgContext(ctx, buf, nil)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, rdssock.ErrTruncated) {
				r.mu.Lock()
				r.foreign++
				r.mu.Unlock()
				continue
			}
			return fmt.Errorf("receive: %w", err)
		}
		if !from.IsValid() {
			continue
		}
		var h stressHdr
		if !h.parse(buf[:n]) {
			r.mu.Lock()
			r.foreign++
			r.mu.Unlock()
			continue
		}
		key := streamKey{h.run, h.task, from}
		switch h.typ {
		case typeRDMAHello:
			if err := r.rdmaHello(ctx, e, h, buf[:n], from); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("RDMA hello from %v: %w", from, err)
			}
		case typeRDMAImm:
			known, err := r.rdmaImm(e, h, from)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("RDMA credit to %v: %w", from, err)
			}
			if !known {
				r.mu.Lock()
				r.foreign++
				r.mu.Unlock()
				continue
			}
			r.mu.Lock()
			s := r.streams[key]
			if s == nil {
				s = &recvStream{}
				r.streams[key] = s
			}
			if h.seq != s.next {
				s.seqErrors++
			}
			s.next = h.seq + 1
			s.count++
			size := r.rdma[key].size
			r.mu.Unlock()
			r.msgs.Add(1)
			r.bytes.Add(uint64(size))
		case typeData, typeReq:
			r.mu.Lock()
			s := r.streams[key]
			if s == nil {
				s = &recvStream{}
				r.streams[key] = s
			}
			if h.seq != s.next {
				s.seqErrors++
			}
			s.next = h.seq + 1
			s.count++
			r.mu.Unlock()
			r.msgs.Add(1)
			r.bytes.Add(uint64(n))
			if h.typ == typeReq {
				size := min(max(int(h.aux), stressHeader), maxMessage)
				a := stressHdr{typ: typeAck, task: h.task, run: h.run, seq: h.seq, ts: h.ts}
				a.put(ack)
				if err := sendRetry(e, r.c, ack[:size], from, 10*time.Second); err != nil {
					if ctx.Err() != nil {
						return nil
					}
					return fmt.Errorf("ack to %v: %w", from, err)
				}
				r.acks.Add(1)
			}
		case typeFin:
			r.mu.Lock()
			s := r.streams[key]
			if s == nil {
				s = &recvStream{}
				r.streams[key] = s
			}
			var counted, errs uint64 = s.count, s.seqErrors
			first := !s.finished
			s.finished = true
			run := r.runs[h.run]
			if run == nil {
				run = &recvRun{}
				r.runs[h.run] = run
			}
			if first {
				run.tasks = int(h.aux)
				run.finished++
				r.finished++
				r.seqErrs += s.seqErrors
			}
			runDone := run.finished >= run.tasks
			var badData int64
			if st := r.rdma[key]; st != nil {
				badData = int64(st.badData)
			}
			r.mu.Unlock()
			a := stressHdr{typ: typeFinAck, task: h.task, run: h.run, seq: counted, aux: uint32(min(errs, 1<<32-1)), ts: badData}
			a.put(ack)
			if err := sendRetry(e, r.c, ack[:stressHeader], from, 10*time.Second); err != nil {
				return fmt.Errorf("count to %v: %w", from, err)
			}
			r.closeRDMA(&key) // the sender's operations are all complete
			if runDone && r.once {
				r.doneOnce.Do(func() { close(r.allDone) })
				// The fin acks must reach the senders before the socket
				// closes.
				if err := drain(e, r.c, 10*time.Second); err != nil {
					return err
				}
				return nil
			}
		}
	}
}

// waitFinished waits until the first run has finished or d has passed.
func (r *receiver) waitFinished(d time.Duration) {
	r.mu.Lock()
	ch := r.allDone
	r.mu.Unlock()
	if ch == nil {
		return
	}
	select {
	case <-ch:
	case <-time.After(d):
	}
}

func (r *receiver) report() *receiverReport {
	r.mu.Lock()
	defer r.mu.Unlock()
	end := r.end
	if end.IsZero() {
		end = time.Now()
	}
	secs := end.Sub(r.start).Seconds()
	tr, _ := r.c.Transport()
	rep := &receiverReport{
		Address:       r.c.LocalAddrPort().String(),
		Transport:     tr.String(),
		Seconds:       secs,
		Received:      r.msgs.Load(),
		ReceivedBytes: r.bytes.Load(),
		Acks:          r.acks.Load(),
		Runs:          len(r.runs),
		TasksFinished: r.finished,
		SeqErrors:     r.seqErrs,
		Foreign:       r.foreign,
		RDMA:          r.rdmaReport(),
	}
	if secs > 0 {
		rep.MsgsPerSec = float64(rep.Received) / secs
		rep.MBPerSec = float64(rep.ReceivedBytes) / secs / 1e6
	}
	return rep
}

// ---- sender ----

type senderTask struct {
	id      uint16
	c       *rdssock.Conn
	hist    *hist.Histogram // written by the task's goroutine only
	sent    uint64
	acked   atomic.Uint64
	counted uint64
	rdma    *rdmaTask // RDMA mode
}

type sender struct {
	o     *stressOpts
	dst   netip.AddrPort
	runID uint32
	tasks []*senderTask
	start time.Time
	end   atomic.Int64 // UnixNano when the last task stopped sending

	msgs, bytes, congested, errs, inflight atomic.Uint64
}

func (o *stressOpts) newSender(dst netip.AddrPort) (*sender, error) {
	var src netip.Addr
	var err error
	if o.from != "" {
		if src, err = parseAddr("-from address", o.from); err != nil {
			return nil, err
		}
	} else if src, err = o.sock.sourceFor(dst.Addr()); err != nil {
		return nil, err
	}
	if src.Is4() != dst.Addr().Is4() {
		return nil, usagef("source %v and destination %v are not the same IP version", src, dst.Addr())
	}
	s := &sender{o: o, dst: dst, runID: rand.Uint32()}
	big := max(int(o.size), int(o.ackSize))
	for i := range o.tasks {
		c, err := o.sock.listen(netip.AddrPortFrom(src, 0), func(cfg *rdssock.Config) {
			if cfg.SendBuffer == 0 {
				cfg.SendBuffer = max(bufferFor(big), 2*o.depth*int(o.size))
			}
			// Room for every answer in flight (rr): a task reads none
			// while its send waits for a congested receiver, and the
			// receiver must not wait for this port meanwhile.
			if need := max(2*o.depth*int(o.ackSize), 4*big); cfg.ReceiveBuffer == 0 && need > 256<<10 {
				cfg.ReceiveBuffer = need
			}
			cfg.ForceBuffers = cfg.ForceBuffers || isRoot()
		})
		if err != nil {
			s.close()
			return nil, err
		}
		t := &senderTask{id: uint16(i), c: c, hist: hist.New(7)}
		s.tasks = append(s.tasks, t)
		if o.rdma != "" {
			if err := o.newRDMATask(s, t); err != nil {
				s.close()
				return nil, err
			}
		}
	}
	return s, nil
}

func (s *sender) close() {
	for _, t := range s.tasks {
		t.c.Close()
		if t.rdma != nil {
			t.rdma.close()
		}
	}
}

func (s *sender) run(ctx context.Context, e *env) error {
	s.start = time.Now()
	sendCtx := ctx
	if s.o.duration > 0 {
		var cancel context.CancelFunc
		sendCtx, cancel = context.WithTimeout(ctx, s.o.duration)
		defer cancel()
	}
	errc := make(chan error, len(s.tasks))
	for _, t := range s.tasks {
		if t.rdma != nil {
			go func() { errc <- s.runRDMATask(ctx, sendCtx, e, t) }()
			continue
		}
		go func() { errc <- s.runTask(ctx, sendCtx, e, t) }()
	}
	var first error
	for range s.tasks {
		if err := <-errc; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// runTask is one task of the sender: a single goroutine that sends until
// -depth requests are unanswered (rr), then reads one answer, and so on,
// the way a C program's poll loop does; in oneway mode it only sends. The
// answers and the receiver's final count are read by this goroutine too,
// so no message is handed between goroutines.
func (s *sender) runTask(ctx, sendCtx context.Context, e *env, t *senderTask) error {
	o := s.o
	rr := o.mode == "rr"
	if _, err := warmUp(e, &o.sock, t.c, s.dst.Addr(), o.warmup); err != nil {
		return fmt.Errorf("task %d: warm-up ping: %w", t.id, err)
	}
	msg := make([]byte, o.size)
	for i := range msg[stressHeader:] {
		msg[stressHeader+i] = byte(i)
	}
	buf := make([]byte, maxMessage+1)
	typ := uint8(typeData)
	if rr {
		typ = typeReq
	}
	var answers []rdssock.Message
	if rr {
		answers = newAnswerBatch(min(o.depth, 16))
	}
	unanswered := 0
	var err error
	for o.count == 0 || t.sent < uint64(o.count) {
		if rr && unanswered == o.depth {
			var got int
			if got, err = s.readAnswers(sendCtx, t, answers); err != nil {
				break
			}
			unanswered -= got
			continue
		}
		if sendCtx.Err() != nil {
			break
		}
		h := stressHdr{typ: typ, task: t.id, run: s.runID, seq: t.sent, ts: monoNow(), aux: uint32(o.ackSize)}
		h.put(msg)
		if err = sendWait(sendCtx, t.c, msg, s.dst, 0, &s.congested); err != nil {
			break
		}
		t.sent++
		s.msgs.Add(1)
		s.bytes.Add(uint64(len(msg)))
		if rr {
			unanswered++
			s.inflight.Add(1)
		}
	}
	s.markEnd()
	if err != nil && sendCtx.Err() != nil && ctx.Err() == nil {
		err = nil // the duration ended while waiting
	}
	if err != nil {
		s.errs.Add(1)
		return fmt.Errorf("task %d: %w", t.id, err)
	}
	if ctx.Err() != nil {
		return nil // interrupted
	}
	// Wait for the answers still due, then exchange counts.
	wctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	for ; unanswered > 0; unanswered-- {
		if _, err := s.readTask(wctx, t, buf, typeAck); err != nil {
			if wctx.Err() != nil && ctx.Err() == nil {
				return timeoutf("task %d: %d requests unanswered after %v", t.id, unanswered, o.timeout)
			}
			return fmt.Errorf("task %d: waiting for answers: %w", t.id, err)
		}
	}
	return s.finish(ctx, e, t, t.sent, func(ctx context.Context) (stressHdr, error) {
		return s.readTask(ctx, t, buf, typeFinAck)
	})
}

// finish tells the receiver that task t is done after sent messages, and
// waits for its count, which readFin reads.
func (s *sender) finish(ctx context.Context, e *env, t *senderTask, sent uint64, readFin func(context.Context) (stressHdr, error)) error {
	o := s.o
	fin := make([]byte, stressHeader)
	h := stressHdr{typ: typeFin, task: t.id, run: s.runID, seq: sent, aux: uint32(len(s.tasks))}
	h.put(fin)
	if err := sendRetry(e, t.c, fin, s.dst, o.timeout); err != nil {
		return fmt.Errorf("task %d: send count: %w", t.id, err)
	}
	wctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	a, err := readFin(wctx)
	switch {
	case ctx.Err() != nil:
		return nil
	case wctx.Err() != nil:
		return timeoutf("task %d: the receiver did not report its count within %v", t.id, o.timeout)
	case err != nil:
		return fmt.Errorf("task %d: waiting for the receiver's count: %w", t.id, err)
	}
	t.counted = a.seq
	if a.aux != 0 {
		return fmt.Errorf("task %d: the receiver saw %d messages out of sequence", t.id, a.aux)
	}
	return nil
}

// newAnswerBatch returns n messages for readAnswers, each with room for a
// stress header: the rest of an answer is not needed, and a truncated
// message is no error in a batch.
func newAnswerBatch(n int) []rdssock.Message {
	ms := make([]rdssock.Message, n)
	bufs := make([]byte, n*stressHeader)
	for i := range ms {
		ms[i].Buffer = bufs[i*stressHeader : (i+1)*stressHeader]
	}
	return ms
}

// readAnswers waits for answers to task t's requests and takes every one
// already queued, with one recvmmsg; it returns how many it counted.
func (s *sender) readAnswers(ctx context.Context, t *senderTask, ms []rdssock.Message) (int, error) {
	for {
		n, err := t.c.ReadBatch(ctx, ms, 0)
		if err != nil {
			return 0, err
		}
		got := 0
		for i := range ms[:n] {
			m := &ms[i]
			var h stressHdr
			if m.Addr != s.dst || !h.parse(m.Buffer[:min(m.N, len(m.Buffer))]) || h.run != s.runID || h.task != t.id || h.typ != typeAck {
				continue
			}
			t.hist.Record(uint64(max(monoNow()-h.ts, 0)))
			got++
		}
		if got > 0 {
			t.acked.Add(uint64(got))
			s.inflight.Add(^uint64(got - 1))
			return got, nil
		}
	}
}

// readTask reads task t's socket until a message of type want arrives for
// this run and task from the receiver; other messages are skipped. An
// answer is counted and its round trip recorded.
func (s *sender) readTask(ctx context.Context, t *senderTask, buf []byte, want uint8) (stressHdr, error) {
	for {
		n, _, _, from, err := t.c.ReadMsgContext(ctx, buf, nil)
		if err != nil {
			if errors.Is(err, rdssock.ErrTruncated) {
				continue // not an answer of ours: those fit
			}
			return stressHdr{}, err
		}
		if from != s.dst {
			continue
		}
		var h stressHdr
		if !h.parse(buf[:n]) || h.run != s.runID || h.task != t.id || h.typ != want {
			continue
		}
		if want == typeAck {
			t.hist.Record(uint64(max(monoNow()-h.ts, 0)))
			t.acked.Add(1)
			s.inflight.Add(^uint64(0))
		}
		return h, nil
	}
}

// markEnd records that a task stopped sending; the measured interval ends
// when the last one does.
func (s *sender) markEnd() {
	now := time.Now().UnixNano()
	for {
		old := s.end.Load()
		if old >= now || s.end.CompareAndSwap(old, now) {
			return
		}
	}
}

func (s *sender) report() *senderReport {
	o := s.o
	tr, _ := s.tasks[0].c.Transport()
	rep := &senderReport{
		Mode: o.mode, Source: s.tasks[0].c.LocalAddrPort().Addr().String(), Dest: s.dst.String(), Transport: tr.String(),
		Tasks: o.tasks, Depth: o.depth, Size: int(o.size),
		Sent: s.msgs.Load(), SentBytes: s.bytes.Load(), Congested: s.congested.Load(), Errors: s.errs.Load(),
	}
	if o.mode == "rr" {
		rep.AckSize = int(o.ackSize)
	}
	h := hist.New(7)
	for _, t := range s.tasks {
		rep.Acked += t.acked.Load()
		rep.ReceiverCounted += t.counted
		h.Merge(t.hist)
	}
	rep.CountsMatch = rep.ReceiverCounted == rep.Sent
	if o.rdma != "" {
		s.rdmaReport(rep)
	}
	end := time.Now()
	if ns := s.end.Load(); ns != 0 {
		end = time.Unix(0, ns)
	}
	rep.Seconds = end.Sub(s.start).Seconds()
	if rep.Seconds > 0 {
		rep.MsgsPerSec = float64(rep.Sent) / rep.Seconds
		rep.MBPerSec = float64(rep.SentBytes) / rep.Seconds / 1e6
	}
	if h.Count() > 0 {
		us := func(v uint64) float64 { return float64(v) / 1e3 }
		rep.Latency = &latencyReport{
			Count: h.Count(), Min: us(h.Min()), P50: us(h.Quantile(0.5)), P90: us(h.Quantile(0.9)),
			P99: us(h.Quantile(0.99)), P999: us(h.Quantile(0.999)), Max: us(h.Max()),
			Mean: h.Mean() / 1e3, StdDev: h.StdDev() / 1e3,
		}
		for _, b := range h.PowerBuckets() {
			rep.Latency.Histogram = append(rep.Latency.Histogram, latencyBucket{Low: us(b.Low), High: us(b.High), Count: b.Count})
		}
	}
	return rep
}

// latencyBucket is one histogram row: Count samples in [Low, High]
// microseconds.
type latencyBucket struct {
	Low   float64 `json:"low"`
	High  float64 `json:"high"`
	Count uint64  `json:"count"`
}

// histBarWidth is the length of the longest bar.
const histBarWidth = 40

// printLatencyHistogram prints one line per bucket: its range, its count
// and a bar scaled to the fullest bucket.
func printLatencyHistogram(w io.Writer, bs []latencyBucket) {
	var most uint64
	for _, b := range bs {
		most = max(most, b.Count)
	}
	if most == 0 {
		return
	}
	for _, b := range bs {
		n := int((b.Count*histBarWidth + most - 1) / most) // a non-empty bucket gets at least one mark
		fmt.Fprintf(w, "  %10s .. %-10s %10d |%s\n", fmtUS(b.Low), fmtUS(b.High), b.Count, strings.Repeat("#", n))
	}
}

// liveSnap is what the live line shows, read from the counters.
type liveSnap struct {
	sender, receiver                 bool
	sent, sentBytes, inflight        uint64
	congested, errs, recv, recvBytes uint64
}

func snapshot(s *sender, r *receiver) liveSnap {
	var x liveSnap
	if s != nil {
		x.sender = true
		x.sent, x.sentBytes, x.inflight = s.msgs.Load(), s.bytes.Load(), s.inflight.Load()
		x.congested, x.errs = s.congested.Load(), s.errs.Load()
	}
	if r != nil {
		x.receiver = true
		x.recv, x.recvBytes = r.msgs.Load(), r.bytes.Load()
	}
	return x
}

// liveLine formats the line for second sec from the counters now (cur)
// and a second ago (prev): rates over that second, in-flight and error
// totals now.
func liveLine(sec int, cur, prev liveSnap) string {
	line := fmt.Sprintf("%4ds", sec)
	if cur.sender {
		line += fmt.Sprintf("  sent %8d msg/s %8.2f MB/s  in-flight %4d  congested %d  errors %d",
			cur.sent-prev.sent, float64(cur.sentBytes-prev.sentBytes)/1e6, cur.inflight, cur.congested, cur.errs)
	}
	if cur.receiver {
		line += fmt.Sprintf("  received %8d msg/s %8.2f MB/s", cur.recv-prev.recv, float64(cur.recvBytes-prev.recvBytes)/1e6)
	}
	return line
}

// liveLines prints one line per second while the run lasts.
func liveLines(w io.Writer, s *sender, r *receiver, stop chan struct{}) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	prev := snapshot(s, r)
	for i := 1; ; i++ {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		cur := snapshot(s, r)
		fmt.Fprintln(w, liveLine(i, cur, prev))
		prev = cur
	}
}

func fmtUS(v float64) string {
	if v >= 1000 {
		return fmt.Sprintf("%.2f ms", v/1000)
	}
	return fmt.Sprintf("%.1f µs", v)
}

func printStress(w io.Writer, rep *stressReport) {
	if s := rep.Sender; s != nil {
		fmt.Fprintf(w, "stress %s: %v -> %s (%s), %d tasks, depth %d, size %d", s.Mode, s.Source, s.Dest, s.Transport, s.Tasks, s.Depth, s.Size)
		if s.AckSize > 0 {
			fmt.Fprintf(w, ", ack %d", s.AckSize)
		}
		fmt.Fprintf(w, ", %.2f s\n", s.Seconds)
		fmt.Fprintf(w, "  sent      %d messages, %d bytes (%.0f msg/s, %.2f MB/s)\n", s.Sent, s.SentBytes, s.MsgsPerSec, s.MBPerSec)
		if s.Mode == "rr" {
			fmt.Fprintf(w, "  acked     %d\n", s.Acked)
		}
		match := "matches"
		if !s.CountsMatch {
			match = "MISMATCH"
		}
		fmt.Fprintf(w, "  receiver  counted %d (%s)\n", s.ReceiverCounted, match)
		fmt.Fprintf(w, "  congested %d retries, errors %d\n", s.Congested, s.Errors)
		if r := s.RDMA; r != nil {
			printRDMASender(w, s, r)
		}
		if l := s.Latency; l != nil {
			fmt.Fprintf(w, "  latency   min %s  p50 %s  p90 %s  p99 %s  p99.9 %s  max %s  (mean %s, stddev %s, %d samples)\n",
				fmtUS(l.Min), fmtUS(l.P50), fmtUS(l.P90), fmtUS(l.P99), fmtUS(l.P999), fmtUS(l.Max), fmtUS(l.Mean), fmtUS(l.StdDev), l.Count)
			printLatencyHistogram(w, l.Histogram)
		}
	}
	if r := rep.Receiver; r != nil {
		fmt.Fprintf(w, "receiver %s (%s): %d messages, %d bytes in %.2f s (%.0f msg/s, %.2f MB/s), %d acks sent, %d runs, %d tasks finished, %d sequence errors, %d foreign\n",
			r.Address, r.Transport, r.Received, r.ReceivedBytes, r.Seconds, r.MsgsPerSec, r.MBPerSec, r.Acks, r.Runs, r.TasksFinished, r.SeqErrors, r.Foreign)
		if x := r.RDMA; x != nil {
			fmt.Fprintf(w, "  rdma      %d tasks, %d buffers, %d registrations, %d verified, %d verify errors, %d bogus, %d rejected, %d freed idle\n",
				x.Tasks, x.Buffers, x.Registrations, x.Verified, x.VerifyErrors, x.Bogus, x.Rejected, x.IdleFreed)
		}
	}
}
