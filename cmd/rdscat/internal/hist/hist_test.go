package hist

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// The buckets tile the whole uint64 range without gaps or overlaps, and
// every value lands in the bucket whose bounds hold it.
func TestBucketsTile(t *testing.T) {
	for _, p := range []uint{1, 3, 7, 12} {
		h := New(p)
		last := h.index(math.MaxUint64)
		var next uint64
		for i := 0; i <= last; i++ {
			lo, hi := h.bounds(i)
			if lo != next || hi < lo {
				t.Fatalf("p=%d bucket %d = [%d, %d], want it to start at %d", p, i, lo, hi, next)
			}
			if h.index(lo) != i || h.index(hi) != i {
				t.Fatalf("p=%d bucket %d = [%d, %d] but index(lo)=%d index(hi)=%d", p, i, lo, hi, h.index(lo), h.index(hi))
			}
			if lo >= 1<<p && float64(hi-lo+1) > float64(lo)/float64(uint64(1)<<p) {
				t.Fatalf("p=%d bucket %d = [%d, %d] is wider than 2^-p of its values", p, i, lo, hi)
			}
			next = hi + 1
		}
		if next != 0 { // wrapped: the last bucket ends at MaxUint64
			t.Fatalf("p=%d: buckets end at %d, not at MaxUint64", p, next-1)
		}
	}
}

func exactQuantile(sorted []uint64, q float64) uint64 {
	rank := int(math.Ceil(q * float64(len(sorted))))
	return sorted[max(rank, 1)-1]
}

func TestQuantilesWithinError(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, p := range []uint{2, 7, 10} {
		for _, dist := range []string{"uniform", "lognormal", "small"} {
			h := New(p)
			var vals []uint64
			for range 20000 {
				var v uint64
				switch dist {
				case "uniform":
					v = r.Uint64N(1 << 40)
				case "lognormal":
					v = uint64(math.Exp(r.NormFloat64()*2 + 11))
				case "small":
					v = r.Uint64N(200)
				}
				vals = append(vals, v)
				h.Record(v)
			}
			slices.Sort(vals)
			for _, q := range []float64{0, 0.001, 0.25, 0.5, 0.9, 0.99, 0.999, 1} {
				got, want := h.Quantile(q), exactQuantile(vals, q)
				if got < want || float64(got-want) > float64(want)/float64(uint64(1)<<p) {
					t.Errorf("p=%d %s: Quantile(%v) = %d, exact %d: outside [exact, exact*(1+2^-p)]", p, dist, q, got, want)
				}
			}
			if h.Min() != vals[0] || h.Max() != vals[len(vals)-1] || h.Count() != uint64(len(vals)) {
				t.Errorf("p=%d %s: min/max/count = %d/%d/%d, want %d/%d/%d", p, dist, h.Min(), h.Max(), h.Count(), vals[0], vals[len(vals)-1], len(vals))
			}
			var sum float64
			for _, v := range vals {
				sum += float64(v)
			}
			if m := sum / float64(len(vals)); math.Abs(h.Mean()-m) > 1e-9*m {
				t.Errorf("p=%d %s: Mean = %v, want %v", p, dist, h.Mean(), m)
			}
		}
	}
}

func TestExactSmallValues(t *testing.T) {
	h := New(7)
	for v := uint64(1); v <= 100; v++ {
		h.Record(v)
	}
	for _, c := range []struct {
		q    float64
		want uint64
	}{{0, 1}, {0.01, 1}, {0.5, 50}, {0.9, 90}, {0.99, 99}, {1, 100}} {
		if got := h.Quantile(c.q); got != c.want {
			t.Errorf("Quantile(%v) = %d, want %d", c.q, got, c.want)
		}
	}
	if got, want := h.StdDev(), math.Sqrt((100*100-1)/12.0); math.Abs(got-want) > 1e-9 {
		t.Errorf("StdDev = %v, want %v", got, want)
	}
}

func TestEmptyAndExtremes(t *testing.T) {
	h := New(7)
	if h.Quantile(0.5) != 0 || h.Count() != 0 || h.Mean() != 0 || h.StdDev() != 0 || h.Buckets() != nil {
		t.Fatal("empty histogram reports values")
	}
	h.Record(math.MaxUint64)
	h.Record(0)
	if got := h.Quantile(1); got != math.MaxUint64 {
		t.Errorf("Quantile(1) = %d, want MaxUint64", got)
	}
	if got := h.Quantile(0.5); got != 0 {
		t.Errorf("Quantile(0.5) = %d, want 0", got)
	}
	h.RecordN(5, 0)
	if h.Count() != 2 {
		t.Errorf("RecordN(_, 0) changed the count to %d", h.Count())
	}
}

func TestMergeEqualsRecordingAll(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	a, b, all := New(7), New(7), New(7)
	for i := range 5000 {
		v := r.Uint64N(1 << uint(10+i%30))
		all.Record(v)
		if i%3 == 0 {
			a.Record(v)
		} else {
			b.Record(v)
		}
	}
	a.Merge(b)
	if !slices.Equal(a.Buckets(), all.Buckets()) || a.Min() != all.Min() || a.Max() != all.Max() || a.Count() != all.Count() {
		t.Fatal("merged histogram differs from one that recorded every value")
	}
	for _, q := range []float64{0.5, 0.99} {
		if a.Quantile(q) != all.Quantile(q) {
			t.Errorf("Quantile(%v): merged %d, direct %d", q, a.Quantile(q), all.Quantile(q))
		}
	}
	empty := New(7)
	empty.Merge(a)
	if empty.Count() != a.Count() || empty.Min() != a.Min() {
		t.Error("merge into an empty histogram lost data")
	}
}

func TestNewRejectsBadPrecision(t *testing.T) {
	for _, p := range []uint{0, 17} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("New(%d) did not panic", p)
				}
			}()
			New(p)
		}()
	}
}

func BenchmarkRecord(b *testing.B) {
	h := New(7)
	b.ReportAllocs()
	h.Record(1 << 40) // grow once
	for i := 0; b.Loop(); i++ {
		h.Record(uint64(i) * 7919)
	}
}

func TestPowerBuckets(t *testing.T) {
	h := New(7)
	for _, v := range []uint64{0, 3, 3, 5, 1000, 1023, 1024, 70000} {
		h.Record(v)
	}
	got := h.PowerBuckets()
	want := []Bucket{
		{0, 0, 1}, {1, 1, 0}, {2, 3, 2}, {4, 7, 1}, {8, 15, 0}, {16, 31, 0}, {32, 63, 0}, {64, 127, 0},
		{128, 255, 0}, {256, 511, 0}, {512, 1023, 2}, {1024, 2047, 1}, {2048, 4095, 0}, {4096, 8191, 0},
		{8192, 16383, 0}, {16384, 32767, 0}, {32768, 65535, 0}, {65536, 131071, 1},
	}
	if len(got) != len(want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
	var sum uint64
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("bucket %d = %v, want %v", i, got[i], want[i])
		}
		sum += got[i].Count
	}
	if sum != h.Count() {
		t.Errorf("counts sum to %d, want %d", sum, h.Count())
	}
	if New(7).PowerBuckets() != nil {
		t.Error("empty histogram has buckets")
	}
	one := New(3)
	one.RecordN(200, 4)
	if got := one.PowerBuckets(); len(got) != 1 || got[0] != (Bucket{128, 255, 4}) {
		t.Errorf("single value: %v", got)
	}
}
