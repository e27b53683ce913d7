package reliability

import "testing"

// twoStreams reports whether order, a permutation of sequence numbers, is
// an interleaving of 0..k-1 in order and of k and above in order, for
// some k.
func twoStreams(order []uint64) bool {
	for k := uint64(1); k <= uint64(len(order)); k++ {
		var early, late uint64 = 0, k
		ok := true
		for _, seq := range order {
			switch {
			case seq < k && seq == early:
				early++
			case seq >= k && seq == late:
				late++
			default:
				ok = false
			}
			if !ok {
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

func TestTwoStreams(t *testing.T) {
	for _, tc := range []struct {
		order []uint64
		want  bool
	}{
		{[]uint64{0, 1, 2, 3}, true},
		{[]uint64{2, 3, 0, 1, 4}, true},    // 0-1 overtaken by 2-3
		{[]uint64{0, 3, 1, 4, 2, 5}, true}, // 0-2 and 3-5 interleaved
		{[]uint64{3, 0, 4, 1, 2}, true},
		{[]uint64{1, 0, 3, 2}, false}, // no split keeps both streams in order
		{[]uint64{0, 2, 1, 4, 3}, false},
		{[]uint64{2, 0, 3, 1}, true},
		{[]uint64{3, 1, 0, 2}, false},
		{[]uint64{}, false},
	} {
		if got := twoStreams(tc.order); got != tc.want {
			t.Errorf("twoStreams(%v) = %v, want %v", tc.order, got, tc.want)
		}
	}
}
