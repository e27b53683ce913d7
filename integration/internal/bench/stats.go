package bench

import (
	"cmp"
	"slices"
)

// Percentile returns the element at fraction p (0 to 1) of sorted, by
// nearest rank, or the zero value for an empty slice.
func Percentile[T cmp.Ordered](sorted []T, p float64) T {
	var zero T
	if len(sorted) == 0 {
		return zero
	}
	i := int(p*float64(len(sorted)-1) + 0.5)
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// Median returns the median of xs (the mean of the middle two for an even
// count), or 0 for none. xs is not modified.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Spread returns (max-min)/median of xs: how far apart the rounds were,
// as a fraction of the median. It is 0 for fewer than two values.
func Spread(xs []float64) float64 {
	m := Median(xs)
	if len(xs) < 2 || m == 0 {
		return 0
	}
	return (slices.Max(xs) - slices.Min(xs)) / m
}
