package guest

import (
	"bufio"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/go-rds/rds/integration/internal/kernel"
	"github.com/go-rds/rds/integration/internal/vmconf"
)

// Modprobe is the guest's /sbin/modprobe, run by the kernel's request_module
// as "modprobe -q -- NAME". It resolves NAME (a module name or an alias such
// as net-pf-21) through modules.dep and modules.alias, loads the module with
// its dependencies and exits 0, or exits 1 when it cannot. A module built
// into the kernel (listed in modules.builtin) needs no loading: exit 0.
func Modprobe(args []string) int {
	var names []string
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			names = append(names, a)
		}
	}
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return 1
	}
	dir := filepath.Join(vmconf.ModulesDir, unix.ByteSliceToString(u.Release[:]))
	f, err := os.Open(filepath.Join(dir, "modules.dep"))
	if err != nil {
		return 1
	}
	deps, err := kernel.ParseModulesDep(f)
	f.Close()
	if err != nil {
		return 1
	}
	builtin, _ := os.ReadFile(filepath.Join(dir, "modules.builtin"))
	code := 0
	for _, n := range names {
		mod := kernel.ModuleName(n)
		if listsBuiltin(string(builtin), mod) {
			continue
		}
		if _, ok := deps[mod]; !ok {
			mod = resolveAlias(filepath.Join(dir, "modules.alias"), n)
		}
		entry, ok := deps[mod]
		if !ok {
			code = 1
			continue
		}
		for i := len(entry) - 1; i >= 0; i-- {
			if err := loadModule(filepath.Join(dir, entry[i])); err != nil {
				code = 1
				break
			}
		}
	}
	return code
}

// listsBuiltin reports whether modules.builtin content lists the module.
func listsBuiltin(builtin, mod string) bool {
	for _, l := range strings.Fields(builtin) {
		if kernel.ModuleName(l) == mod {
			return true
		}
	}
	return false
}

// resolveAlias finds the module whose alias pattern matches name.
func resolveAlias(file, name string) string {
	f, err := os.Open(file)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) != 3 || fs[0] != "alias" {
			continue
		}
		if ok, _ := path.Match(fs[1], name); ok {
			return kernel.ModuleName(fs[2])
		}
	}
	return ""
}
