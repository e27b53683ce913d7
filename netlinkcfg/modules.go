package netlinkcfg

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Module names this package knows about.
const (
	ModuleRDS          = "rds"           // the AF_RDS core
	ModuleRDSTCP       = "rds_tcp"       // RDS over TCP
	ModuleRDSRDMA      = "rds_rdma"      // RDS over InfiniBand/RoCE ("ib" transport)
	ModuleRdmaRxe      = "rdma_rxe"      // Soft-RoCE
	ModuleCRC32Generic = "crc32_generic" // crc32 algorithm rdma_rxe needs to add a link
	ModuleVeth         = "veth"          // virtual Ethernet pairs
)

// ParseProcModules parses the format of /proc/modules: one module a line,
// "name size refcount deps state address [taint]". It returns the set of
// module names whose state is Live or Loading (a module being unloaded is
// not counted). Malformed lines are an error.
func ParseProcModules(r io.Reader) (map[string]bool, error) {
	mods := make(map[string]bool)
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		f := strings.Fields(text)
		if len(f) < 5 {
			return nil, newError([]error{ErrInvalid}, "parse /proc/modules line %d %q: want at least 5 fields, got %d", line, text, len(f))
		}
		switch f[4] {
		case "Live", "Loading":
			mods[f[0]] = true
		case "Unloading":
		default:
			return nil, newError([]error{ErrInvalid}, "parse /proc/modules line %d %q: unknown state %q", line, text, f[4])
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read /proc/modules: %w", err)
	}
	return mods, nil
}

// LoadedModules returns the modules listed in /proc/modules. Modules built
// into the kernel are not listed there; see RDSModules, which also checks
// /sys/module. On a kernel without module support /proc/modules does not
// exist and the error matches ErrNotFound.
func LoadedModules() (map[string]bool, error) {
	return loadedModulesAt("/proc")
}

func loadedModulesAt(procRoot string) (map[string]bool, error) {
	p := filepath.Join(procRoot, "modules")
	f, err := os.Open(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, newError([]error{ErrNotFound, err}, "%s does not exist: the kernel has no loadable module support", p)
		}
		return nil, fmt.Errorf("read loaded modules: %w", err)
	}
	defer f.Close()
	return ParseProcModules(f)
}

// ModuleStatus tells which kernel pieces RDS and its tests need are present.
// A field is true when the module is listed in /proc/modules or has a
// /sys/module directory (built-in modules with parameters appear only
// there); CRC32 is also true when /proc/crypto offers a "crc32" algorithm
// from any driver, or when the running kernel ships no crc32_generic
// module at all (neither in modules.dep nor in modules.builtin): kernels
// that dropped it (Debian's 7.2) build the crc32 library in and their rxe
// uses it directly.
type ModuleStatus struct {
	RDS     bool // rds: AF_RDS itself
	RDSTCP  bool // rds_tcp: the TCP transport
	RDSRDMA bool // rds_rdma: the InfiniBand/RoCE ("ib") transport
	RdmaRxe bool // rdma_rxe: Soft-RoCE devices
	CRC32   bool // crc32 for rxe: crc32_generic or a built-in crc32, needed to add rxe links
	Veth    bool // veth: virtual Ethernet pairs
}

// RDSModules reports which of rds, rds_tcp, rds_rdma, rdma_rxe,
// crc32_generic and veth the running kernel provides.
func RDSModules() (ModuleStatus, error) {
	return rdsModulesAt("/proc", "/sys", "/lib/modules", "/usr/lib/modules")
}

func rdsModulesAt(procRoot, sysRoot string, modRoots ...string) (ModuleStatus, error) {
	mods, err := loadedModulesAt(procRoot)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return ModuleStatus{}, err
	}
	has := func(name string) bool {
		if mods[name] {
			return true
		}
		st, err := os.Stat(filepath.Join(sysRoot, "module", name))
		return err == nil && st.IsDir()
	}
	st := ModuleStatus{
		RDS:     has(ModuleRDS),
		RDSTCP:  has(ModuleRDSTCP),
		RDSRDMA: has(ModuleRDSRDMA),
		RdmaRxe: has(ModuleRdmaRxe),
		CRC32:   has(ModuleCRC32Generic) || cryptoHas(filepath.Join(procRoot, "crypto"), "crc32") || shipsNo(procRoot, modRoots, ModuleCRC32Generic),
		Veth:    has(ModuleVeth),
	}
	return st, nil
}

// shipsNo reports whether the running kernel's module lists
// (modules.dep and modules.builtin under one of modRoots/RELEASE, RELEASE
// read from procRoot/sys/kernel/osrelease) are readable and name no module
// called name. It is false when no list can be read: then nobody knows.
func shipsNo(procRoot string, modRoots []string, name string) bool {
	rel, err := os.ReadFile(filepath.Join(procRoot, "sys", "kernel", "osrelease"))
	if err != nil {
		return false
	}
	release := strings.TrimSpace(string(rel))
	known := false
	for _, root := range modRoots {
		for _, list := range []string{"modules.dep", "modules.builtin"} {
			b, err := os.ReadFile(filepath.Join(root, release, list))
			if err != nil {
				continue
			}
			known = true
			for line := range strings.Lines(string(b)) {
				path, _, _ := strings.Cut(line, ":")
				base := filepath.Base(strings.TrimSpace(path))
				if mod, _, _ := strings.Cut(base, "."); mod == name || strings.ReplaceAll(mod, "-", "_") == name {
					return false
				}
			}
		}
	}
	return known
}

// cryptoHas reports whether /proc/crypto (at path) lists an algorithm with
// the given name.
func cryptoHas(path, alg string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "name" && strings.TrimSpace(v) == alg {
			return true
		}
	}
	return false
}

// Transport names accepted by ModuleStatus.Missing.
const (
	TransportTCP = "tcp" // RDS/TCP: rds, rds_tcp
	TransportIB  = "ib"  // RDS/IB on any RDMA device: rds, rds_rdma
	TransportRxe = "rxe" // RDS/IB over Soft-RoCE: rds, rds_rdma, rdma_rxe, and crc32_generic where the kernel ships it
)

// Missing returns nil when everything the transport needs is present, and
// otherwise an error (matching ErrModuleNotLoaded) that names the missing
// modules and the modprobe command that loads them. transport is one of
// TransportTCP, TransportIB (alias "rdma") and TransportRxe; "" checks the
// RDS core only.
func (s ModuleStatus) Missing(transport string) error {
	type need struct {
		name string
		ok   bool
	}
	var needs []need
	needs = append(needs, need{ModuleRDS, s.RDS})
	switch transport {
	case "":
	case TransportTCP:
		needs = append(needs, need{ModuleRDSTCP, s.RDSTCP})
	case TransportIB, "rdma":
		needs = append(needs, need{ModuleRDSRDMA, s.RDSRDMA})
	case TransportRxe:
		needs = append(needs, need{ModuleRDSRDMA, s.RDSRDMA}, need{ModuleRdmaRxe, s.RdmaRxe}, need{ModuleCRC32Generic, s.CRC32})
	default:
		return invalidf("unknown RDS transport %q: want %q, %q, %q or \"\"", transport, TransportTCP, TransportIB, TransportRxe)
	}
	var missing []string
	for _, n := range needs {
		if !n.ok {
			missing = append(missing, n.name)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	what := "RDS"
	if transport != "" {
		what = "RDS transport " + transport
	}
	verb := "is"
	if len(missing) > 1 {
		verb = "are"
	}
	return newError([]error{ErrModuleNotLoaded}, "%s needs %s, which %s not loaded (modprobe -a %s)",
		what, strings.Join(missing, ", "), verb, strings.Join(missing, " "))
}
