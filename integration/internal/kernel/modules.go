//go:build linux

package kernel

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// ModuleName normalises a module name or path: base name without the .ko
// suffix (and compression suffix), dashes replaced by underscores.
func ModuleName(p string) string {
	b := path.Base(p)
	if i := strings.Index(b, ".ko"); i >= 0 {
		b = b[:i]
	}
	return strings.ReplaceAll(b, "-", "_")
}

// ModuleDB is the parsed modules.dep and modules.builtin of one kernel.
type ModuleDB struct {
	deps    map[string][]string // module name -> its own path followed by dependency paths
	builtin map[string]bool
}

// ParseModulesDep parses modules.dep content: "path: dep1 dep2 ...", where
// the dependency list is the full closure, in the order modprobe unloads it
// (so it is loaded from the last to the first).
func ParseModulesDep(r io.Reader) (map[string][]string, error) {
	deps := make(map[string][]string)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		mod, rest, ok := strings.Cut(line, ":")
		if !ok {
			if strings.TrimSpace(line) == "" {
				continue
			}
			return nil, fmt.Errorf("modules.dep: malformed line %q", line)
		}
		deps[ModuleName(mod)] = append([]string{mod}, strings.Fields(rest)...)
	}
	return deps, sc.Err()
}

// LoadModuleDB reads modules.dep and modules.builtin from k.
func (k *Kernel) LoadModuleDB() (*ModuleDB, error) {
	f, err := os.Open(filepath.Join(k.ModulesDir(), "modules.dep"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	builtin, err := os.ReadFile(filepath.Join(k.ModulesDir(), "modules.builtin"))
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	return NewModuleDB(f, builtin)
}

// NewModuleDB parses modules.dep and modules.builtin content.
func NewModuleDB(dep io.Reader, builtin []byte) (*ModuleDB, error) {
	deps, err := ParseModulesDep(dep)
	if err != nil {
		return nil, err
	}
	db := &ModuleDB{deps: deps, builtin: make(map[string]bool)}
	for _, l := range strings.Fields(string(builtin)) {
		db.builtin[ModuleName(l)] = true
	}
	return db, nil
}

// Closure returns the module files (relative to the modules directory) needed
// to load names, in load order, each once. Built-in modules need no file.
// A module that is neither loadable nor built in is an error naming it.
func (db *ModuleDB) Closure(names []string) ([]string, error) {
	var order []string
	seen := make(map[string]bool)
	var missing []string
	for _, n := range names {
		n = ModuleName(n)
		entry, ok := db.deps[n]
		if !ok {
			if db.builtin[n] {
				continue
			}
			missing = append(missing, n)
			continue
		}
		for i := len(entry) - 1; i >= 0; i-- {
			if p := entry[i]; !seen[p] {
				seen[p] = true
				order = append(order, p)
			}
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("required kernel module(s) not found (neither in modules.dep nor built in): %s",
			strings.Join(missing, ", "))
	}
	return order, nil
}

// Has reports whether the kernel has the module, loadable or built in.
func (db *ModuleDB) Has(name string) bool {
	_, ok := db.deps[ModuleName(name)]
	return ok || db.IsBuiltin(name)
}

// IsBuiltin reports whether the module is compiled into the kernel.
func (db *ModuleDB) IsBuiltin(name string) bool { return db.builtin[ModuleName(name)] }
