//go:build linux

package blockserver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// Content returns size bytes of deterministic pseudo-random data for seed:
// the initial file of a test, which client and server can build
// independently.
func Content(seed uint64, size int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, size)
	for i := 0; i < size; i += 8 {
		v := r.Uint64()
		for j := 0; j < 8 && i+j < size; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b
}

// WorkloadResult reports a Workload run.
type WorkloadResult struct {
	Reads, Writes int
	Bytes         int64
	Duration      time.Duration
	Sum           [32]byte // SHA-256 of the client's model of the file at the end
}

// Workload performs ops random block reads and writes (half each) with
// workers concurrent callers, against model, the client's copy of the
// file's current content, which it keeps up to date. Every read is compared
// with the model; the first mismatch or error stops the run. Calls on the
// same block are serialised so that the model stays exact.
func Workload(ctx context.Context, cl *Client, model []byte, ops, workers int, seed uint64) (WorkloadResult, error) {
	bs := cl.BlockSize()
	if len(model) != int(cl.Blocks())*bs {
		return WorkloadResult{}, fmt.Errorf("blockserver: model of %d bytes for %d blocks of %d", len(model), cl.Blocks(), bs)
	}
	locks := make([]sync.Mutex, cl.Blocks())
	var (
		mu     sync.Mutex
		res    WorkloadResult
		first  error
		next   int
		wg     sync.WaitGroup
		cctx   context.Context
		cancel context.CancelFunc
	)
	cctx, cancel = context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(w)))
			for {
				mu.Lock()
				if next >= ops || first != nil {
					mu.Unlock()
					return
				}
				next++
				mu.Unlock()
				blk := r.Uint64N(cl.Blocks())
				want := model[int(blk)*bs : int(blk+1)*bs]
				locks[blk].Lock()
				var err error
				write := r.IntN(2) == 0
				if write {
					fresh := make([]byte, bs)
					for i := range fresh {
						fresh[i] = byte(r.Uint32())
					}
					err = cl.WriteBlock(cctx, blk, func(buf []byte) { copy(buf, fresh) })
					if err == nil {
						copy(want, fresh)
					}
				} else {
					err = cl.ReadBlock(cctx, blk, func(data []byte) error {
						if !bytes.Equal(data, want) {
							return fmt.Errorf("blockserver: block %d differs from the model", blk)
						}
						return nil
					})
				}
				locks[blk].Unlock()
				mu.Lock()
				if err != nil && first == nil {
					first = fmt.Errorf("op %d (%s block %d): %w", next, map[bool]string{true: "write", false: "read"}[write], blk, err)
					cancel()
				}
				if err == nil {
					if write {
						res.Writes++
					} else {
						res.Reads++
					}
					res.Bytes += int64(bs)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	res.Duration = time.Since(start)
	res.Sum = sha256.Sum256(model)
	return res, first
}
