package netlinkcfg

import (
	"path/filepath"
	"strings"
	"testing"
)

// FuzzSysctlPath checks that no key maps outside /proc/sys/net.
func FuzzSysctlPath(f *testing.F) {
	for _, k := range []string{"net.ipv4.conf.all.rp_filter", "net/ipv4/conf/eth0.100/rp_filter", "net.rds.ping_enable", "../x", "net/../..", "net..x"} {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, key string) {
		p, err := sysctlPath("/proc/sys", key)
		if err != nil {
			return
		}
		if filepath.Clean(p) != p || !strings.HasPrefix(p, "/proc/sys/net/") {
			t.Fatalf("sysctlPath(%q) = %q escapes /proc/sys/net", key, p)
		}
		if k, err := rdsSysctlKey(key); err == nil {
			if p, err := sysctlPath("/proc/sys", k); err == nil && !strings.HasPrefix(p, "/proc/sys/net/rds/") {
				t.Fatalf("rds key %q maps to %q", key, p)
			}
		}
	})
}

// FuzzParsePortState checks that parsing never panics and that a known
// state's text parses back to itself.
func FuzzParsePortState(f *testing.F) {
	for _, s := range []string{"4: ACTIVE\n", "1: DOWN", "7: X", "", ":"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		st, err := ParsePortState(s)
		if err != nil {
			return
		}
		if st < 0 {
			t.Fatalf("ParsePortState(%q) = %d", s, st)
		}
		if st <= PortActiveDefer {
			back, err := ParsePortState(strings.TrimSpace(s))
			if err != nil || back != st {
				t.Fatalf("re-parse of %q: %v, %v", s, back, err)
			}
		}
	})
}

// FuzzParseProcModules checks that parsing never panics and reports only
// names that appear in the input.
func FuzzParseProcModules(f *testing.F) {
	f.Add("rds 212992 1 rds_tcp, Live 0x0\nrds_tcp 36864 0 - Live 0x0 (E)\n")
	f.Add("x 1 0 - Unloading 0x0\n")
	f.Fuzz(func(t *testing.T, in string) {
		mods, err := ParseProcModules(strings.NewReader(in))
		if err != nil {
			return
		}
		for m := range mods {
			if m == "" || !strings.Contains(in, m) {
				t.Fatalf("module %q not in input %q", m, in)
			}
		}
	})
}
