//go:build integration && race

package rdmafaults

// raceEnabled reports that the race detector is on. It makes sync.Pool
// drop items at random, so allocation counts of pooled paths mean nothing.
const raceEnabled = true
