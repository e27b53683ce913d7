//go:build linux

package kernel

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// plainModulesDir holds, inside the extracted tree, decompressed copies
// of compressed modules under their original relative paths.
const plainModulesDir = "plain-modules"

// ModuleFile returns the file to copy into a guest for the module at rel
// (a path relative to ModulesDir, as modules.dep names it). For a
// compressed module (.ko.xz, .ko.zst) that is a decompressed copy, made
// once per cached tree: under TCG the guest kernel's own decompression
// took about 0.8 s of every 6.12 boot (19 modules), where an uncompressed
// 6.1 tree loads the same set in half the time. The copy keeps the
// original name, so modules.dep still finds it; the guest tells the two
// apart by content (see IsELF). If the copy cannot be made (the xz or zstd
// command is missing), the compressed file is returned and the reason
// logged.
func (k *Kernel) ModuleFile(rel string, logf func(format string, args ...any)) string {
	src := filepath.Join(k.ModulesDir(), rel)
	tool, pkg := moduleCompression(rel)
	if tool == "" {
		return src
	}
	dst := filepath.Join(k.Root, plainModulesDir, rel)
	if _, err := os.Stat(dst); err == nil {
		return dst
	}
	err := os.MkdirAll(filepath.Dir(dst), 0o755)
	if err == nil {
		var plain []byte
		if plain, err = decompressFile(src, tool, pkg); err == nil {
			// Several rdsvm processes may do this at once: each writes
			// the same bytes through its own temporary file.
			err = writeAtomic(dst, plain)
		}
	}
	if err != nil {
		if logf != nil {
			logf("module %s is loaded compressed (slower under TCG): %v", rel, err)
		}
		return src
	}
	return dst
}

// moduleCompression names the command (and its Debian package) that
// decompresses a module file with this name, or "" if it is not
// compressed.
func moduleCompression(name string) (tool, pkg string) {
	switch {
	case strings.HasSuffix(name, ".ko.xz"):
		return "xz", "xz-utils"
	case strings.HasSuffix(name, ".ko.zst"):
		return "zstd", "zstd"
	case strings.HasSuffix(name, ".ko.gz"):
		return "gzip", "gzip"
	}
	return "", ""
}

func decompressFile(path, tool, pkg string) ([]byte, error) {
	cmd := exec.Command(tool, "-dc", path)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s -dc: %v: %s (install the %s package)", tool, err, bytes.TrimSpace(stderr.Bytes()), pkg)
	}
	if !IsELF(out.Bytes()) {
		return nil, fmt.Errorf("%s -dc gave no ELF file", tool)
	}
	return out.Bytes(), nil
}

// IsELF reports whether b begins with the ELF magic: a module file the
// kernel loads as is, whatever its name says.
func IsELF(b []byte) bool { return bytes.HasPrefix(b, []byte("\x7fELF")) }
