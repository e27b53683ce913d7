package initramfs

import (
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
)

// LibDirs are the host directories searched for DT_NEEDED libraries.
var LibDirs = []string{
	"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
	"/lib64", "/usr/lib64", "/lib", "/usr/lib",
}

// IsStatic reports whether the ELF file at p has no program interpreter.
func IsStatic(p string) (bool, error) {
	f, err := elf.Open(p)
	if err != nil {
		return false, err
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return false, nil
		}
	}
	return true, nil
}

// SharedLibs returns the absolute paths of the program interpreter and every
// shared library p needs, directly or indirectly, as the dynamic loader would
// look them up by name in LibDirs (or by RUNPATH/RPATH). A static binary
// needs none.
func SharedLibs(p string) ([]string, error) {
	var out []string
	seen := make(map[string]bool)
	var visit func(file string, top bool) error
	visit = func(file string, top bool) error {
		f, err := elf.Open(file)
		if err != nil {
			return err
		}
		defer f.Close()
		if top {
			for _, prog := range f.Progs {
				if prog.Type != elf.PT_INTERP {
					continue
				}
				buf := make([]byte, prog.Filesz)
				if _, err := prog.ReadAt(buf, 0); err != nil {
					return fmt.Errorf("%s: read PT_INTERP: %w", file, err)
				}
				interp := string(buf)
				for len(interp) > 0 && interp[len(interp)-1] == 0 {
					interp = interp[:len(interp)-1]
				}
				if !seen[interp] {
					seen[interp] = true
					out = append(out, interp)
				}
			}
		}
		needed, err := f.DynString(elf.DT_NEEDED)
		if err != nil {
			return nil // no dynamic section: static
		}
		var extra []string
		for _, tag := range []elf.DynTag{elf.DT_RUNPATH, elf.DT_RPATH} {
			if v, err := f.DynString(tag); err == nil {
				for _, s := range v {
					extra = append(extra, filepath.SplitList(s)...)
				}
			}
		}
		for _, lib := range needed {
			found := ""
			for _, d := range append(extra, LibDirs...) {
				c := filepath.Join(d, lib)
				if _, err := os.Stat(c); err == nil {
					found = c
					break
				}
			}
			if found == "" {
				return fmt.Errorf("%s needs %s, not found in %v", file, lib, LibDirs)
			}
			if seen[found] {
				continue
			}
			seen[found] = true
			out = append(out, found)
			if err := visit(found, false); err != nil {
				return err
			}
		}
		return nil
	}
	if err := visit(p, true); err != nil {
		return nil, err
	}
	return out, nil
}
