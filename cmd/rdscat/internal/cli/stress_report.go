//go:build linux

package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/go-rds/rds/cmd/rdscat/internal/hist"
)

// The results of rdscat stress: the JSON summary, the text report with its
// latency histogram, and the live line printed every second on a terminal.

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
	Ports         int                 `json:"ports"`                       // consecutive ports from Address's (-ports)
	PerPort       []uint64            `json:"received_per_port,omitempty"` // with several ports: Received of each
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

// failure is the error for a run whose report shows lost messages or
// wrong data, else nil.
func (rep *stressReport) failure() error {
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

func (r *receiver) report() *receiverReport {
	r.mu.Lock()
	defer r.mu.Unlock()
	end := r.end
	if end.IsZero() {
		end = time.Now()
	}
	secs := end.Sub(r.start).Seconds()
	first := r.ports[0].c
	tr, _ := first.Transport()
	recv, recvBytes, acks := r.totals()
	rep := &receiverReport{
		Address:       first.LocalAddrPort().String(),
		Ports:         len(r.ports),
		PerPort:       r.perPort(),
		Transport:     tr.String(),
		Seconds:       secs,
		Received:      recv,
		ReceivedBytes: recvBytes,
		Acks:          acks,
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

func (s *sender) report() *senderReport {
	o := s.o
	tr, _ := s.tasks[0].c.Transport()
	rep := &senderReport{
		Mode: o.mode, Source: s.tasks[0].c.LocalAddrPort().Addr().String(), Dest: s.dst.String(), Transport: tr.String(),
		Tasks: o.tasks, Depth: o.depth, Size: int(o.size),
		Congested: s.congestedSends(), Errors: s.errs.Load(),
	}
	rep.Sent, rep.SentBytes, _ = s.totals()
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
		x.sent, x.sentBytes, x.inflight = s.totals()
		x.congested, x.errs = s.congestedSends(), s.errs.Load()
	}
	if r != nil {
		x.receiver = true
		x.recv, x.recvBytes, _ = r.totals()
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
		if len(r.PerPort) > 0 {
			fmt.Fprintf(w, "  ports     %d from %s, messages on each: %v\n", r.Ports, r.Address, r.PerPort)
		}
		if x := r.RDMA; x != nil {
			fmt.Fprintf(w, "  rdma      %d tasks, %d buffers, %d registrations, %d verified, %d verify errors, %d bogus, %d rejected, %d freed idle\n",
				x.Tasks, x.Buffers, x.Registrations, x.Verified, x.VerifyErrors, x.Bogus, x.Rejected, x.IdleFreed)
		}
	}
}
