package netlinkcfg

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// netnsRunDir is where named namespaces are bind-mounted, as by iproute2.
const netnsRunDir = "/run/netns"

// Namespace is an open network namespace: either one taken from the
// calling process (CurrentNamespace) or a named one persisted by a bind
// mount at /run/netns/NAME, the same convention as `ip netns add`, so
// `ip netns exec NAME ...` works on namespaces created here and the other
// way round.
//
// A Namespace holds an open file descriptor; Close releases it. Methods are
// safe for concurrent use.
type Namespace struct {
	name string // "" for a namespace that is not named
	path string // bind-mount path of a named namespace

	mu     sync.RWMutex
	fd     int
	closed bool
}

// CurrentNamespace opens the network namespace of the calling thread
// (/proc/thread-self/ns/net). Outside Namespace.Do every thread of a
// program that leaves namespaces alone is in the same one, so this is the
// program's namespace (the initial one for a program started in it); called
// inside Do, it is the namespace Do switched to.
func CurrentNamespace() (*Namespace, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	path := "/proc/thread-self/ns/net"
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err == unix.ENOENT {
		// Kernels before 3.17 have no /proc/thread-self.
		path = fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid())
		fd, err = unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return nil, newError([]error{err}, "open current network namespace %s: %v (is /proc mounted?)", path, err)
	}
	return &Namespace{fd: fd}, nil
}

// onDisposableThread runs fn on a new goroutine locked to an OS thread
// that is discarded when fn returns, and waits for fn's error. fn may
// therefore change the thread's namespaces.
//
// The Go runtime ends a thread whose goroutine exits while locked, except
// the main thread, which it parks forever instead; a main thread parked in
// a foreign namespace would keep that namespace alive and change what
// /proc/self/ns/net shows. So when the goroutine lands on the main thread,
// it keeps that thread locked (and untouched) while a second goroutine,
// necessarily on another thread, does the work; then it unlocks it.
func onDisposableThread(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() == unix.Getpid() {
			errc <- onDisposableThread(fn)
			runtime.UnlockOSThread()
			return
		}
		// Deliberately never unlocked: the thread ends with this
		// goroutine.
		errc <- fn()
	}()
	return <-errc
}

// validNamespaceName rejects names that cannot be a single file under
// /run/netns.
func validNamespaceName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return invalidf("network namespace name %q: want a plain file name such as \"rds-peer\"", name)
	}
	return nil
}

// CreateNamespace creates a new network namespace and persists it at
// /run/netns/NAME (creating /run/netns, and making it a shared mount point
// like iproute2 does, when needed; /run may be a tmpfs the caller mounted).
// The namespace starts with only a loopback link, which is down.
//
// The calling thread's namespace is not changed: the unshare happens on a
// fresh goroutine locked to its OS thread, and that thread is discarded
// afterwards.
func CreateNamespace(name string) (*Namespace, error) {
	return createNamespaceAt(netnsRunDir, name)
}

func createNamespaceAt(dir, name string) (*Namespace, error) {
	if err := validNamespaceName(name); err != nil {
		return nil, err
	}
	if err := ensureNetnsDir(dir); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, name)
	// The mount point: an empty file, created exclusively so that an
	// existing namespace of that name is never replaced.
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, newError([]error{ErrExists, err}, "create network namespace %s: %s already exists (OpenNamespace it, or Delete it / `ip netns del %s` first)", name, path, name)
		}
		return nil, newError([]error{err}, "create network namespace %s: %v", name, err)
	}
	f.Close()

	err = onDisposableThread(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return newError([]error{err}, "create network namespace %s: unshare(CLONE_NEWNET): %v (needs CAP_SYS_ADMIN)", name, err)
		}
		src := fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid())
		if err := unix.Mount(src, path, "none", unix.MS_BIND, ""); err != nil {
			return newError([]error{err}, "create network namespace %s: bind-mount %s on %s: %v", name, src, path, err)
		}
		return nil
	})
	if err != nil {
		os.Remove(path)
		return nil, err
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Unmount(path, unix.MNT_DETACH)
		os.Remove(path)
		return nil, newError([]error{err}, "open new network namespace %s: %v", path, err)
	}
	return &Namespace{name: name, path: path, fd: fd}, nil
}

// ensureNetnsDir creates dir and, like iproute2, makes it a shared mount
// point (bind-mounting it on itself first when it is not a mount point), so
// namespace mounts made here propagate to other mount namespaces.
func ensureNetnsDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return newError([]error{err}, "create %s: %v (mount a tmpfs on /run first if it is read-only)", dir, err)
	}
	err := unix.Mount("", dir, "none", unix.MS_SHARED|unix.MS_REC, "")
	if err == unix.EINVAL {
		if err := unix.Mount(dir, dir, "none", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return newError([]error{err}, "bind-mount %s on itself: %v", dir, err)
		}
		err = unix.Mount("", dir, "none", unix.MS_SHARED|unix.MS_REC, "")
	}
	if err != nil {
		return newError([]error{err}, "make %s a shared mount: %v", dir, err)
	}
	return nil
}

// OpenNamespace opens the named namespace at /run/netns/NAME, whether it
// was made by CreateNamespace or by `ip netns add`.
func OpenNamespace(name string) (*Namespace, error) {
	return openNamespaceAt(netnsRunDir, name)
}

func openNamespaceAt(dir, name string) (*Namespace, error) {
	if err := validNamespaceName(name); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, name)
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		if err == unix.ENOENT {
			return nil, newError([]error{ErrNotFound, err}, "network namespace %s not found: no %s (CreateNamespace it or `ip netns add %s`)", name, path, name)
		}
		return nil, newError([]error{err}, "open network namespace %s: %v", path, err)
	}
	var st unix.Statfs_t
	if err := unix.Fstatfs(fd, &st); err == nil && st.Type != unix.NSFS_MAGIC {
		unix.Close(fd)
		return nil, newError([]error{ErrInvalid}, "open network namespace %s: %s is not a namespace bind mount (stale file? remove it)", name, path)
	}
	return &Namespace{name: name, path: path, fd: fd}, nil
}

// dup returns an independent Namespace for the same namespace, with its
// own descriptor.
func (ns *Namespace) dup() (*Namespace, error) {
	ns.mu.RLock()
	defer ns.mu.RUnlock()
	if ns.closed {
		return nil, newError([]error{ErrClosed}, "network namespace %s is closed", ns)
	}
	fd, err := unix.FcntlInt(uintptr(ns.fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, newError([]error{err}, "duplicate descriptor of network namespace %s: %v", ns, err)
	}
	return &Namespace{name: ns.name, path: ns.path, fd: fd}, nil
}

// Name returns the namespace's name under /run/netns, or "" for an
// unnamed namespace such as the one CurrentNamespace returns.
func (ns *Namespace) Name() string { return ns.name }

// String returns the name, or "current" for an unnamed namespace.
func (ns *Namespace) String() string {
	if ns.name == "" {
		return "current"
	}
	return ns.name
}

// FD returns the namespace file descriptor, or -1 after Close. It can be
// passed as rdssock.Config.NetNS or to setns(2); it stays owned by the
// Namespace.
func (ns *Namespace) FD() int {
	ns.mu.RLock()
	defer ns.mu.RUnlock()
	if ns.closed {
		return -1
	}
	return ns.fd
}

// Do runs fn on a fresh goroutine locked to an OS thread that has been
// switched into ns, waits for it and returns its error. The thread is
// never handed back to the Go scheduler: it ends with the goroutine (and
// Do never uses the process's main thread, which the runtime would park
// instead of ending). Goroutines that fn starts do not run in ns; sockets
// fn opens stay in ns after it returns.
func (ns *Namespace) Do(fn func() error) error {
	return onDisposableThread(func() error {
		ns.mu.RLock()
		if ns.closed {
			ns.mu.RUnlock()
			return newError([]error{ErrClosed}, "network namespace %s is closed", ns)
		}
		err := unix.Setns(ns.fd, unix.CLONE_NEWNET)
		ns.mu.RUnlock()
		if err != nil {
			return newError([]error{err}, "enter network namespace %s: setns: %v (needs CAP_SYS_ADMIN)", ns, err)
		}
		return fn()
	})
}

// Close releases the namespace's file descriptor. A named namespace keeps
// existing until Delete (or `ip netns del`).
func (ns *Namespace) Close() error {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	if ns.closed {
		return nil
	}
	ns.closed = true
	return unix.Close(ns.fd)
}

// Delete closes ns and removes its name: it unmounts /run/netns/NAME and
// removes the file. The kernel frees the namespace once nothing else holds
// it (processes, open descriptors, links keep it alive). Delete of an
// unnamed namespace only closes it and reports ErrInvalid.
func (ns *Namespace) Delete() error {
	cerr := ns.Close()
	if ns.path == "" {
		return invalidf("delete network namespace: %s is not a named namespace", ns)
	}
	if err := unix.Unmount(ns.path, unix.MNT_DETACH); err != nil && err != unix.EINVAL && err != unix.ENOENT {
		return newError([]error{err}, "delete network namespace %s: unmount %s: %v", ns.name, ns.path, err)
	}
	if err := os.Remove(ns.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return newError([]error{err}, "delete network namespace %s: %v", ns.name, err)
	}
	return cerr
}

// Sysctl reads a net.* sysctl of ns (see the package-level Sysctl for the
// key syntax).
func (ns *Namespace) Sysctl(key string) (string, error) {
	var v string
	err := ns.Do(func() error {
		var err error
		v, err = Sysctl(key)
		return err
	})
	return v, err
}

// SetSysctl writes a net.* sysctl of ns, e.g.
// ns.SetSysctl("net.ipv4.conf.all.rp_filter", "0").
func (ns *Namespace) SetSysctl(key, value string) error {
	return ns.Do(func() error { return SetSysctl(key, value) })
}
