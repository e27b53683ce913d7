package netlinkcfg

import (
	"math"
	"os"
	"path/filepath"
	"time"

	"errors"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// SetNetem installs (or replaces) a netem root qdisc on the named link,
// the equivalent of `tc qdisc replace dev NAME root netem ...`. It affects
// the link's egress only; impair both ends of a veth pair for symmetric
// faults.
func (h *Handle) SetNetem(name string, n Netem) error {
	if err := n.Validate(); err != nil {
		return err
	}
	l, err := h.link(name)
	if err != nil {
		return err
	}
	q := netlink.NewNetem(netlink.QdiscAttrs{
		LinkIndex: l.Attrs().Index,
		Parent:    netlink.HANDLE_ROOT,
	}, n.attrs())
	if err := h.route.QdiscReplace(q); err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EOPNOTSUPP) {
			return newError([]error{ErrModuleNotLoaded, err}, "set netem on link %s: the kernel has no netem qdisc (modprobe sch_netem): %v", name, err)
		}
		return newError([]error{err}, "set netem on link %s in network namespace %s: %v", name, h.ns, err)
	}
	return nil
}

// attrs converts validated parameters to vishvananda/netlink's form.
func (n Netem) attrs() netlink.NetemQdiscAttrs {
	return netlink.NetemQdiscAttrs{
		Latency:     uint32(n.Delay.Microseconds()),
		Jitter:      uint32(n.Jitter.Microseconds()),
		Loss:        float32(n.Loss),
		Duplicate:   float32(n.Duplicate),
		CorruptProb: float32(n.Corrupt),
		ReorderProb: float32(n.Reorder),
		Limit:       n.Limit,
	}
}

// Qdisc returns the type of the named link's root qdisc ("netem",
// "noqueue", "pfifo_fast", ...), or "" when it has none.
func (h *Handle) Qdisc(name string) (string, error) {
	q, err := h.rootQdisc(name)
	if err != nil || q == nil {
		return "", err
	}
	return q.Type(), nil
}

// NetemOf returns the parameters of the named link's netem root qdisc, as
// the kernel reports them (percentages are rounded to its 1/2^32 steps and
// durations to its clock ticks). It fails with ErrNotFound when the root
// qdisc is not netem.
func (h *Handle) NetemOf(name string) (Netem, error) {
	q, err := h.rootQdisc(name)
	if err != nil {
		return Netem{}, err
	}
	nq, ok := q.(*netlink.Netem)
	if !ok {
		typ := "none"
		if q != nil {
			typ = q.Type()
		}
		return Netem{}, newError([]error{ErrNotFound}, "link %s has no netem root qdisc (it has %s)", name, typ)
	}
	return netemFromQdisc(nq), nil
}

func (h *Handle) rootQdisc(name string) (netlink.Qdisc, error) {
	l, err := h.link(name)
	if err != nil {
		return nil, err
	}
	qs, err := h.route.QdiscList(l)
	if err != nil {
		return nil, newError([]error{err}, "list qdiscs of link %s in network namespace %s: %v", name, h.ns, err)
	}
	for _, q := range qs {
		if q.Attrs().Parent == netlink.HANDLE_ROOT {
			return q, nil
		}
	}
	return nil, nil
}

// ClearQdisc removes the named link's root qdisc (netem or any other
// configured one), returning the link to its default queueing. It is not
// an error when there is nothing to remove.
func (h *Handle) ClearQdisc(name string) error {
	q, err := h.rootQdisc(name)
	if err != nil {
		return err
	}
	if q == nil || q.Attrs().Handle == 0 {
		// No root qdisc, or the kernel's built-in default (noqueue,
		// handle 0), which cannot be deleted.
		return nil
	}
	if err := h.route.QdiscDel(q); err != nil && !errors.Is(err, unix.ENOENT) {
		return newError([]error{err}, "remove root qdisc %s of link %s in network namespace %s: %v", q.Type(), name, h.ns, err)
	}
	return nil
}

// netemFromQdisc converts a netem qdisc as dumped by the kernel.
func netemFromQdisc(q *netlink.Netem) Netem {
	n := Netem{
		Loss:      percentFromU32(q.Loss),
		Duplicate: percentFromU32(q.Duplicate),
		Corrupt:   percentFromU32(q.CorruptProb),
		Reorder:   percentFromU32(q.ReorderProb),
		Limit:     q.Limit,
	}
	if ticks, err := readPschedTicks("/proc"); err == nil && ticks > 0 {
		n.Delay = time.Duration(math.Round(float64(q.Latency)/ticks)) * time.Microsecond
		n.Jitter = time.Duration(math.Round(float64(q.Jitter)/ticks)) * time.Microsecond
	}
	return n
}

func readPschedTicks(procRoot string) (float64, error) {
	b, err := os.ReadFile(filepath.Join(procRoot, "net", "psched"))
	if err != nil {
		return 0, err
	}
	return pschedTickPerUsec(string(b))
}
