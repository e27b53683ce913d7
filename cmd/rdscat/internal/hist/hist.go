// Package hist is a log-linear histogram of non-negative integers (HDR
// histogram style) for latency percentiles.
//
// Values below 2^P (P significant bits) get a bucket each. Above that, every
// power-of-two range [2^e, 2^(e+1)) is cut into 2^P equal buckets, so a
// bucket is never wider than 1/2^P of the values it holds. A quantile is
// reported as the highest value of its bucket (clamped to the largest value
// recorded): never below the exact sample quantile and less than 2^-P above
// it. Count, Min, Max and Mean are exact.
package hist

import (
	"fmt"
	"math"
	"math/bits"
)

// Histogram records uint64 values. The zero value is not usable; call New.
// It is not safe for concurrent use: give each goroutine its own and Merge.
type Histogram struct {
	p       uint // significant bits
	counts  []uint64
	n       uint64
	min     uint64
	max     uint64
	sum     float64
	sumSq   float64
	highest int // highest bucket index in use, -1 when empty
}

// New returns a histogram with p significant bits: relative error below
// 2^-p. p must be in [1, 16]; 7 (under 0.8%) suits latencies.
func New(p uint) *Histogram {
	if p < 1 || p > 16 {
		panic(fmt.Sprintf("hist: %d significant bits is outside [1, 16]", p))
	}
	return &Histogram{p: p, highest: -1}
}

// index returns v's bucket.
func (h *Histogram) index(v uint64) int {
	if v < 1<<h.p {
		return int(v)
	}
	shift := uint(bits.Len64(v)) - 1 - h.p
	sub := (v >> shift) - 1<<h.p
	return int(uint64(shift+1)<<h.p + sub)
}

// bounds returns the lowest and highest value that fall into bucket i.
func (h *Histogram) bounds(i int) (lo, hi uint64) {
	if i < 1<<h.p {
		return uint64(i), uint64(i)
	}
	shift := uint(i>>h.p) - 1
	sub := uint64(i) & (1<<h.p - 1)
	lo = (1<<h.p + sub) << shift
	return lo, lo + (1<<shift - 1)
}

// Record adds one value.
func (h *Histogram) Record(v uint64) { h.RecordN(v, 1) }

// RecordN adds value v n times.
func (h *Histogram) RecordN(v, n uint64) {
	if n == 0 {
		return
	}
	i := h.index(v)
	if i >= len(h.counts) {
		grown := make([]uint64, max(i+1, 2*len(h.counts)))
		copy(grown, h.counts)
		h.counts = grown
	}
	h.counts[i] += n
	h.highest = max(h.highest, i)
	if h.n == 0 || v < h.min {
		h.min = v
	}
	h.max = max(h.max, v)
	h.n += n
	f := float64(v)
	h.sum += f * float64(n)
	h.sumSq += f * f * float64(n)
}

// Merge adds every value recorded in o, which must have the same number of
// significant bits.
func (h *Histogram) Merge(o *Histogram) {
	if o.p != h.p {
		panic("hist: Merge of histograms with different precision")
	}
	if o.n == 0 {
		return
	}
	for i := 0; i <= o.highest; i++ {
		if c := o.counts[i]; c > 0 {
			if i >= len(h.counts) {
				grown := make([]uint64, o.highest+1)
				copy(grown, h.counts)
				h.counts = grown
			}
			h.counts[i] += c
		}
	}
	h.highest = max(h.highest, o.highest)
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	h.n += o.n
	h.sum += o.sum
	h.sumSq += o.sumSq
}

// Count returns the number of values recorded.
func (h *Histogram) Count() uint64 { return h.n }

// Min returns the smallest value recorded (0 when empty).
func (h *Histogram) Min() uint64 { return h.min }

// Max returns the largest value recorded (0 when empty).
func (h *Histogram) Max() uint64 { return h.max }

// Mean returns the arithmetic mean (0 when empty).
func (h *Histogram) Mean() float64 {
	if h.n == 0 {
		return 0
	}
	return h.sum / float64(h.n)
}

// StdDev returns the population standard deviation (0 when empty).
func (h *Histogram) StdDev() float64 {
	if h.n == 0 {
		return 0
	}
	m := h.Mean()
	return math.Sqrt(max(0, h.sumSq/float64(h.n)-m*m))
}

// Quantile returns the value at quantile q in [0, 1]: the smallest bucket
// whose cumulative count reaches ceil(q*Count), reported as that bucket's
// highest value, clamped to [Min, Max]. It returns 0 when empty.
func (h *Histogram) Quantile(q float64) uint64 {
	if h.n == 0 {
		return 0
	}
	q = min(max(q, 0), 1)
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = max(rank, 1)
	var cum uint64
	for i := 0; i <= h.highest; i++ {
		cum += h.counts[i]
		if cum >= rank {
			_, hi := h.bounds(i)
			return min(max(hi, h.min), h.max)
		}
	}
	return h.max
}

// Bucket is one non-empty bucket: the values in [Low, High] occurred Count
// times.
type Bucket struct {
	Low, High, Count uint64
}

// Buckets returns the non-empty buckets in increasing order.
func (h *Histogram) Buckets() []Bucket {
	var bs []Bucket
	for i := 0; i <= h.highest; i++ {
		if c := h.counts[i]; c > 0 {
			lo, hi := h.bounds(i)
			bs = append(bs, Bucket{lo, hi, c})
		}
	}
	return bs
}

// PowerBuckets returns the recorded values grouped by powers of two, for a
// short display: one bucket for 0, then [2^e, 2^(e+1)-1] for every e whose
// range holds a value. Empty ranges between the lowest and highest are
// included with Count 0, so a bar chart shows the gaps. The counts sum to
// Count.
func (h *Histogram) PowerBuckets() []Bucket {
	var bs []Bucket
	for _, b := range h.Buckets() {
		lo, hi := uint64(0), uint64(0)
		if b.Low > 0 {
			e := uint(bits.Len64(b.Low)) - 1
			lo, hi = 1<<e, 1<<e+(1<<e-1)
		}
		if n := len(bs); n > 0 && bs[n-1].Low == lo {
			bs[n-1].Count += b.Count
			continue
		}
		// Fill the empty powers of two between the previous range and this.
		for n := len(bs); n > 0 && bs[n-1].High+1 < lo; n = len(bs) {
			next := bs[n-1].High + 1
			if next == 1 {
				bs = append(bs, Bucket{1, 1, 0})
				continue
			}
			bs = append(bs, Bucket{next, 2*next - 1, 0})
		}
		bs = append(bs, Bucket{lo, hi, b.Count})
	}
	return bs
}
