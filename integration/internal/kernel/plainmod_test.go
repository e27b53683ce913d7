//go:build linux

package kernel

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestModuleFile(t *testing.T) {
	root := t.TempDir()
	k := &Kernel{Root: root, modules: filepath.Join(root, "lib/modules/test")}
	dir := filepath.Join(k.modules, "kernel/net/rds")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	elf := append([]byte("\x7fELF"), bytes.Repeat([]byte("module body "), 100)...)
	plain := filepath.Join(dir, "rds.ko")
	if err := os.WriteFile(plain, elf, 0o644); err != nil {
		t.Fatal(err)
	}
	var xzOut bytes.Buffer
	cmd := exec.Command("xz", "-c")
	cmd.Stdin, cmd.Stdout = bytes.NewReader(elf), &xzOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("xz (the harness needs xz-utils installed): %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rds_tcp.ko.xz"), xzOut.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bad.ko.xz"), []byte("not xz"), 0o644); err != nil {
		t.Fatal(err)
	}
	var logs []string
	logf := func(f string, a ...any) { logs = append(logs, f) }

	if got := k.ModuleFile("kernel/net/rds/rds.ko", logf); got != plain {
		t.Errorf("uncompressed module: %s, want the file itself", got)
	}
	got := k.ModuleFile("kernel/net/rds/rds_tcp.ko.xz", logf)
	want := filepath.Join(root, plainModulesDir, "kernel/net/rds/rds_tcp.ko.xz")
	if got != want {
		t.Fatalf("compressed module: %s, want %s", got, want)
	}
	if b, err := os.ReadFile(got); err != nil || !bytes.Equal(b, elf) {
		t.Fatalf("decompressed copy: %d bytes, %v; want the %d-byte ELF", len(b), err, len(elf))
	}
	// A second call uses the copy: it no longer needs the source.
	if err := os.Remove(filepath.Join(dir, "rds_tcp.ko.xz")); err != nil {
		t.Fatal(err)
	}
	if again := k.ModuleFile("kernel/net/rds/rds_tcp.ko.xz", logf); again != want {
		t.Errorf("second call: %s, want the cached copy %s", again, want)
	}
	if len(logs) != 0 {
		t.Errorf("logs %q, want none", logs)
	}
	// A module that cannot be decompressed is loaded as it is, and says so.
	bad := filepath.Join(dir, "bad.ko.xz")
	if got := k.ModuleFile("kernel/net/rds/bad.ko.xz", logf); got != bad {
		t.Errorf("undecompressible module: %s, want the file itself", got)
	}
	if len(logs) != 1 || !strings.Contains(logs[0], "loaded compressed") {
		t.Errorf("logs %q, want one line saying the module is loaded compressed", logs)
	}
}

func TestIsELF(t *testing.T) {
	for _, c := range []struct {
		b    string
		want bool
	}{{"\x7fELF\x02", true}, {"\x7fELF", true}, {"\xfd7zXZ\x00", false}, {"\x7fEL", false}, {"", false}} {
		if got := IsELF([]byte(c.b)); got != c.want {
			t.Errorf("IsELF(%q) = %v, want %v", c.b, got, c.want)
		}
	}
}
