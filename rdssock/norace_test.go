//go:build !race

package rdssock

const raceEnabled = false
