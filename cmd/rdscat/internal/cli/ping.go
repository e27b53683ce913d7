//go:build linux

package cli

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"net/netip"
	"time"

	"github.com/go-rds/rds/rdssock"
)

func init() {
	register(&command{
		name:    "ping",
		summary: "RDS ping: check the path to a host, with round-trip times",
		usage:   "[flags] DEST",
		help: `Send RDS pings to DEST and report each reply's round-trip time, then a
summary like ping(8). An RDS ping is a 0-byte message to port 0; the kernel
at DEST answers it from port 0 (while its sysctl net.rds.ping_enable is 1),
so no program needs to run there. The first ping also sets up the RDS
connection and is slower.

Replies carry no sequence number; RDS delivers them in order, so each reply
is matched to the oldest unanswered ping.

Examples:
  rdscat ping 10.0.0.2                       until interrupted
  rdscat ping -c 3 -i 200ms 10.0.0.2
  rdscat ping -c 5 -from 10.0.0.1 -json 10.0.0.2
  rdscat ping -c 1 -W 2s fd00::2`,
		setup: func(fs *flag.FlagSet) func(*env, []string) error {
			o := &pingOpts{}
			o.register(fs)
			return o.run
		},
	})
}

type pingOpts struct {
	sock     sockFlags
	count    int
	interval time.Duration
	wait     time.Duration
	from     string
	tos      uint
	json     bool
	quiet    bool
}

func (o *pingOpts) register(fs *flag.FlagSet) {
	o.sock.register(fs)
	fs.IntVar(&o.count, "c", 0, "stop after sending `N` pings (0: until interrupted)")
	fs.DurationVar(&o.interval, "i", time.Second, "interval between pings")
	fs.DurationVar(&o.wait, "W", 5*time.Second, "after the last ping, wait this long for outstanding replies")
	fs.StringVar(&o.from, "from", "", "source `ADDR` (default: the route's source address)")
	fs.UintVar(&o.tos, "tos", 0, "type of service (0-255); IB opens a connection per TOS, TCP maps all to 0")
	fs.BoolVar(&o.json, "json", false, "print the summary (and every reply) as one JSON object")
	fs.BoolVar(&o.quiet, "q", false, "print only the summary")
}

// PingReply is one answered ping in the JSON summary.
type pingReply struct {
	Seq   int     `json:"seq"`
	RTTms float64 `json:"rtt_ms"`
}

// pingSummary is the JSON form of the summary.
type pingSummary struct {
	Dest        string      `json:"dest"`
	Source      string      `json:"source"`
	Transport   string      `json:"transport"`
	Sent        int         `json:"sent"`
	Received    int         `json:"received"`
	LossPercent float64     `json:"loss_percent"`
	MinMS       float64     `json:"rtt_min_ms"`
	AvgMS       float64     `json:"rtt_avg_ms"`
	MaxMS       float64     `json:"rtt_max_ms"`
	StddevMS    float64     `json:"rtt_stddev_ms"`
	Replies     []pingReply `json:"replies"`
}

func (o *pingOpts) run(e *env, args []string) error {
	dst, src, err := o.addresses(args)
	if err != nil {
		return err
	}
	c, err := o.sock.listen(netip.AddrPortFrom(src, 0), func(cfg *rdssock.Config) { cfg.TOS = uint8(o.tos) })
	if err != nil {
		return err
	}
	defer c.Close()
	tr, _ := c.Transport()
	p := &pinger{o: o, e: e, c: c, dst: dst, target: netip.AddrPortFrom(dst, 0)}
	if !o.quiet && !o.json {
		fmt.Fprintf(e.stdout, "RDS PING %v from %v (transport %v)\n", dst, c.LocalAddrPort(), tr)
	}
	p.sum.Dest, p.sum.Source, p.sum.Transport = dst.String(), c.LocalAddrPort().String(), tr.String()
	p.sum.Replies = []pingReply{}
	replies, readErr := readPingReplies(c, p.target)
	failure := p.ping(replies, readErr)
	p.sum.addRTTs(p.rtts)
	if err := o.printSummary(e, dst, &p.sum); err != nil {
		return err
	}
	if failure != nil {
		return failure
	}
	if p.sum.Received < p.sum.Sent && e.ctx.Err() == nil {
		return timeoutf("%d of %d pings unanswered: is RDS loaded on %v and net.rds.ping_enable set to 1 there?",
			p.sum.Sent-p.sum.Received, p.sum.Sent, dst)
	}
	if p.sum.Sent == 0 {
		return errors.New("interrupted before the first ping")
	}
	return nil
}

// addresses checks the flags and returns the destination in args and the
// source address: -from, else the route's.
func (o *pingOpts) addresses(args []string) (dst, src netip.Addr, err error) {
	if len(args) != 1 {
		return dst, src, usagef("want exactly one DEST address, got %d arguments", len(args))
	}
	if dst, err = parseAddr("destination", args[0]); err != nil {
		return dst, src, err
	}
	switch {
	case o.count < 0:
		return dst, src, usagef("-c must not be negative")
	case o.interval <= 0 || o.wait <= 0:
		return dst, src, usagef("-i and -W must be positive")
	case o.tos > 255:
		return dst, src, usagef("-tos %d is out of range 0-255", o.tos)
	}
	if o.from != "" {
		if src, err = parseAddr("-from address", o.from); err != nil {
			return dst, src, err
		}
	} else if src, err = o.sock.sourceFor(dst); err != nil {
		return dst, src, err
	}
	if src.Is4() != dst.Is4() {
		return dst, src, usagef("source %v and destination %v are not the same IP version", src, dst)
	}
	return dst, src, nil
}

// readPingReplies reads c in a goroutine of its own and sends the arrival
// time of every reply from target, or the read error that ends it.
func readPingReplies(c *rdssock.Conn, target netip.AddrPort) (<-chan time.Time, <-chan error) {
	replies := make(chan time.Time, 64)
	readErr := make(chan error, 1)
	go func() {
		buf := make([]byte, 64)
		for {
			n, _, _, from, err := c.ReadMsg(buf, nil)
			now := time.Now()
			if err != nil {
				readErr <- err
				return
			}
			// The zone is compared without its spelling: the reply
			// names it, dst may give the index.
			if n == 0 && from.Port() == 0 && from.Addr().WithZone("") == target.Addr().WithZone("") {
				replies <- now
			}
		}
	}()
	return replies, readErr
}

// pingProbe is a ping waiting for its reply.
type pingProbe struct {
	seq  int
	sent time.Time
}

// pinger is one run of rdscat ping.
type pinger struct {
	o      *pingOpts
	e      *env
	c      *rdssock.Conn
	dst    netip.Addr
	target netip.AddrPort

	// Replies come back in order, so a FIFO of send times matches them.
	pending []pingProbe
	rtts    []time.Duration
	sum     pingSummary
}

// ping sends a ping every -i until -c pings are sent and answered (or -W
// has passed since the last), the reader fails, or the run is interrupted.
func (p *pinger) ping(replies <-chan time.Time, readErr <-chan error) error {
	tick := time.NewTicker(p.o.interval)
	defer tick.Stop()
	var final <-chan time.Time
	for seq := 1; ; {
		if final == nil && (p.o.count == 0 || seq <= p.o.count) {
			if err := p.send(seq); err != nil {
				return err
			}
			seq++
			if p.o.count > 0 && seq > p.o.count {
				final = time.After(p.o.wait)
			}
		}
		if done, err := p.await(replies, readErr, final, tick.C); done {
			return err
		}
	}
}

// send sends ping seq.
func (p *pinger) send(seq int) error {
	// Take the send time first: the reply can be read (and timestamped)
	// before sendRetry returns.
	sent := time.Now()
	if err := sendRetry(p.e, p.c, nil, p.target, p.o.wait); err != nil {
		return fmt.Errorf("ping %d: %w", seq, err)
	}
	p.pending = append(p.pending, pingProbe{seq, sent})
	p.sum.Sent++
	return nil
}

// await takes replies until the next tick; done says the run is over
// (every ping answered after the last, -W passed, interrupted, or the
// reader failed with err).
func (p *pinger) await(replies <-chan time.Time, readErr <-chan error, final, tick <-chan time.Time) (done bool, err error) {
	for {
		if final != nil && len(p.pending) == 0 {
			return true, nil
		}
		select {
		case at := <-replies:
			p.reply(at)
		case err := <-readErr:
			return true, err
		case <-p.e.ctx.Done():
			return true, nil
		case <-final:
			return true, nil
		case <-tick:
			return false, nil
		}
	}
}

// reply matches a reply that arrived at at to the oldest pending ping.
func (p *pinger) reply(at time.Time) {
	if len(p.pending) == 0 {
		return // a reply to a ping of an earlier run on this port
	}
	pr := p.pending[0]
	p.pending = p.pending[1:]
	rtt := at.Sub(pr.sent)
	p.rtts = append(p.rtts, rtt)
	p.sum.Replies = append(p.sum.Replies, pingReply{Seq: pr.seq, RTTms: ms(rtt)})
	if !p.o.quiet && !p.o.json {
		fmt.Fprintf(p.e.stdout, "reply from %v: seq=%d time=%s ms\n", p.dst, pr.seq, fmtMS(rtt))
	}
}

// addRTTs fills in the received count, the loss and the round-trip
// statistics.
func (sum *pingSummary) addRTTs(rtts []time.Duration) {
	sum.Received = len(rtts)
	if sum.Sent > 0 {
		sum.LossPercent = 100 * float64(sum.Sent-sum.Received) / float64(sum.Sent)
	}
	if len(rtts) == 0 {
		return
	}
	mn, mx, total := rtts[0], rtts[0], time.Duration(0)
	for _, r := range rtts {
		mn, mx, total = min(mn, r), max(mx, r), total+r
	}
	avg := float64(total) / float64(len(rtts))
	var sq float64
	for _, r := range rtts {
		sq += (float64(r) - avg) * (float64(r) - avg)
	}
	sum.MinMS, sum.MaxMS, sum.AvgMS = ms(mn), ms(mx), avg/1e6
	sum.StddevMS = math.Sqrt(sq/float64(len(rtts))) / 1e6
}

// printSummary prints the summary: JSON with -json, else like ping(8).
func (o *pingOpts) printSummary(e *env, dst netip.Addr, sum *pingSummary) error {
	if o.json {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(sum)
	}
	fmt.Fprintf(e.stdout, "--- %v rds ping statistics ---\n", dst)
	fmt.Fprintf(e.stdout, "%d sent, %d received, %.0f%% loss\n", sum.Sent, sum.Received, sum.LossPercent)
	if sum.Received > 0 {
		fmt.Fprintf(e.stdout, "rtt min/avg/max/stddev = %.3f/%.3f/%.3f/%.3f ms\n", sum.MinMS, sum.AvgMS, sum.MaxMS, sum.StddevMS)
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }
