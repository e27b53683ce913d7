package barrier

import (
	"time"

	"github.com/go-rds/rds/internal/barrierlink"
)

func init() {
	barrierlink.NextDeadline = func(t any) int64 {
		tr := t.(*Tracker)
		tr.mu.Lock()
		d := tr.nextDeadlineLocked()
		tr.mu.Unlock()
		return d
	}
	barrierlink.Poll = func(t any, tok uint64, all bool) (bool, int64) {
		tr := t.(*Tracker)
		probe := waiter{tok: Token(tok), all: all}
		tr.mu.Lock()
		done, next := tr.satisfiedLocked(&probe), tr.nextDeadlineLocked()
		tr.mu.Unlock()
		return done, next
	}
	barrierlink.Expire = func(t any) { t.(*Tracker).expire() }
	barrierlink.Watch = func(t any, tok uint64, all bool) (<-chan struct{}, any, bool) {
		tr := t.(*Tracker)
		tr.mu.Lock()
		defer tr.mu.Unlock()
		probe := waiter{tok: Token(tok), all: all}
		if tr.satisfiedLocked(&probe) {
			return nil, nil, true
		}
		w := &waiter{tok: Token(tok), all: all, ch: make(chan struct{})}
		tr.waiters = append(tr.waiters, w)
		return w.ch, w, false
	}
	barrierlink.BeginLane = func(t any, deadline time.Time, keep any, rel any, lane uint32, unsignaled bool) uint64 {
		r, _ := rel.(Releaser)
		kind := kindSealed
		if unsignaled {
			kind = kindUnsent
		}
		return uint64(t.(*Tracker).begin(deadline, keep, r, kind, lane))
	}
	barrierlink.Sent = func(t any, tok uint64) { t.(*Tracker).sent(Token(tok)) }
	barrierlink.CancelLane = func(t any, lane uint32, cancel func() error) error {
		return t.(*Tracker).cancelLane(lane, cancel)
	}
	barrierlink.Timeout = func(t any) time.Duration { return t.(*Tracker).timeout }
	barrierlink.Unsealed = func(t any, tok uint64, all bool) bool {
		tr := t.(*Tracker)
		if !tr.unsignaled.Load() {
			return false
		}
		tr.mu.Lock()
		defer tr.mu.Unlock()
		return tr.unsealedLocked(Token(tok), all)
	}
	barrierlink.Unwatch = func(t any, w any) {
		tr := t.(*Tracker)
		tr.mu.Lock()
		tr.removeWaiterLocked(w.(*waiter))
		tr.mu.Unlock()
	}
}
