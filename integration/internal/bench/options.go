package bench

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// Options are the arguments of one worker role, given as key=value words,
// the same for the Go workers and the C baseline (cbaseline/rdsbench.c).
type Options struct {
	Bind  netip.AddrPort // bind=: the socket's address
	Peer  netip.AddrPort // peer=: where to send
	Size  int            // size=: message or RDMA operation size in bytes (default 64)
	Batch int            // batch=: messages per recvmmsg (receiver) or WriteBatch (Go sender); default 1
	Depth int            // depth=: RDMA operations kept outstanding (default 1)
	Warm  time.Duration  // warm=: seconds from the first message to the start of the window (default 0.5)
	Dur   time.Duration  // dur=: seconds the window lasts (default 2)
	NetNS string         // netns=: path of a network namespace to create the socket in
	TS    bool           // ts=1: SO_TIMESTAMP on, so every message carries a control message
	Spin  time.Duration  // spin=: seconds echo and ping busy-poll a receive before waiting (Go: rdssock.Config.BusyPoll)
	Procs int            // procs=N (Go only, diagnostic): runtime.GOMAXPROCS(N) before anything else
	Raw   int            // raw=1 (Go only, diagnostic): sendmsg/recvmsg with RawSyscall in the poller; raw=2: blocking socket, plain Syscall

	// AllocSites (allocsites=1, Go only, diagnostic) records every heap
	// allocation and prints the call sites of those made in the
	// measurement window as "ALLOCSITE" lines.
	AllocSites bool
}

// ParseOptions parses key=value arguments into Options with defaults.
func ParseOptions(args []string) (*Options, error) {
	o := &Options{Size: 64, Batch: 1, Depth: 1, Warm: 500 * time.Millisecond, Dur: 2 * time.Second}
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok {
			return nil, fmt.Errorf("argument %q: want key=value", a)
		}
		var err error
		switch k {
		case "bind":
			o.Bind, err = netip.ParseAddrPort(v)
		case "peer":
			o.Peer, err = netip.ParseAddrPort(v)
		case "size":
			o.Size, err = strconv.Atoi(v)
		case "batch":
			o.Batch, err = strconv.Atoi(v)
		case "depth":
			o.Depth, err = strconv.Atoi(v)
		case "warm":
			o.Warm, err = seconds(v)
		case "dur":
			o.Dur, err = seconds(v)
		case "netns":
			o.NetNS = v
		case "ts":
			o.TS = v == "1"
		case "spin":
			o.Spin, err = seconds(v)
		case "procs":
			o.Procs, err = strconv.Atoi(v)
		case "raw":
			o.Raw, err = strconv.Atoi(v)
		case "allocsites":
			o.AllocSites = v == "1"
		default:
			return nil, fmt.Errorf("unknown argument %q", k)
		}
		if err != nil {
			return nil, fmt.Errorf("argument %s: %w", a, err)
		}
	}
	if !o.Bind.IsValid() {
		return nil, fmt.Errorf("bind= is required")
	}
	if o.Size < 0 || o.Batch < 1 || o.Depth < 1 || o.Procs < 0 {
		return nil, fmt.Errorf("size and procs must be >= 0, batch and depth >= 1")
	}
	return o, nil
}

func seconds(v string) (time.Duration, error) {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return 0, err
	}
	return time.Duration(f * float64(time.Second)), nil
}

// Args formats o as the key=value words ParseOptions and the C baseline
// read. Zero fields are left out.
func (o *Options) Args() []string {
	var a []string
	a = append(a, "bind="+o.Bind.String())
	if o.Peer.IsValid() {
		a = append(a, "peer="+o.Peer.String())
	}
	a = append(a, "size="+strconv.Itoa(o.Size))
	if o.Batch > 1 {
		a = append(a, "batch="+strconv.Itoa(o.Batch))
	}
	if o.Depth > 1 {
		a = append(a, "depth="+strconv.Itoa(o.Depth))
	}
	if o.Warm > 0 {
		a = append(a, "warm="+strconv.FormatFloat(o.Warm.Seconds(), 'f', -1, 64))
	}
	if o.Dur > 0 {
		a = append(a, "dur="+strconv.FormatFloat(o.Dur.Seconds(), 'f', -1, 64))
	}
	if o.NetNS != "" {
		a = append(a, "netns="+o.NetNS)
	}
	if o.TS {
		a = append(a, "ts=1")
	}
	if o.Spin > 0 {
		a = append(a, "spin="+strconv.FormatFloat(o.Spin.Seconds(), 'f', -1, 64))
	}
	if o.Procs != 0 {
		a = append(a, "procs="+strconv.Itoa(o.Procs))
	}
	if o.Raw != 0 {
		a = append(a, "raw="+strconv.Itoa(o.Raw))
	}
	if o.AllocSites {
		a = append(a, "allocsites=1")
	}
	return a
}

// Result is the parsed "RESULT key=value..." line of a worker.
type Result map[string]float64

// ParseResult parses a line "RESULT k=v k=v ...". It reports false for any
// other line.
func ParseResult(line string) (Result, bool) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(line), "RESULT")
	if !ok {
		return nil, false
	}
	r := Result{}
	for _, f := range strings.Fields(rest) {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return nil, false
		}
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return nil, false
		}
		r[k] = x
	}
	return r, true
}
