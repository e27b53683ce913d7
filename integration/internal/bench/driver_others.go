//go:build !linux

package bench

import (
	"errors"
	"runtime"
)

// Run fails: the benchmark needs Linux with AF_RDS.
func Run(cfg *Config) (*Report, error) {
	return nil, errors.New("bench: RDS benchmarks need Linux, not " + runtime.GOOS)
}
