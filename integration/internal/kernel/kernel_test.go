package kernel

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseDepends(t *testing.T) {
	out := []byte(`linux-image-6.12-amd64
  Depends: linux-image-6.12.117+deb12-amd64
  Recommends: firmware-linux-free
`)
	if got := parseDepends(out); got != "linux-image-6.12.117+deb12-amd64" {
		t.Fatalf("parseDepends = %q", got)
	}
	if got := parseDepends([]byte("linux-image-amd64\n  Recommends: irqbalance\n")); got != "" {
		t.Fatalf("parseDepends without Depends = %q", got)
	}
}

func TestResolveUnknownAlias(t *testing.T) {
	_, err := resolvePackage(t.TempDir(), "5.10", func(string, ...any) {})
	if err == nil || !strings.Contains(err.Error(), "6.1, 6.12") {
		t.Fatalf("unknown alias: %v, want an error listing the aliases", err)
	}
	pkg, err := resolvePackage(t.TempDir(), "linux-image-6.1.0-56-amd64", func(string, ...any) {})
	if err != nil || pkg != "linux-image-6.1.0-56-amd64" {
		t.Fatalf("package name: %q, %v", pkg, err)
	}
}

func TestOpenIncomplete(t *testing.T) {
	root := t.TempDir()
	rel := "6.1.0-56-amd64"
	if err := os.MkdirAll(filepath.Join(root, "lib", "modules", rel), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := open("linux-image-"+rel, root); err == nil {
		t.Fatal("a tree without .complete was accepted")
	}
	for _, f := range []string{".complete", "boot/vmlinuz-" + rel, "lib/modules/" + rel + "/modules.dep"} {
		p := filepath.Join(root, f)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	k, err := open("linux-image-"+rel, root)
	if err != nil {
		t.Fatal(err)
	}
	if k.Release != rel || k.Image() != filepath.Join(root, "boot", "vmlinuz-"+rel) {
		t.Fatalf("open = %+v", k)
	}
}

func TestCacheDir(t *testing.T) {
	t.Setenv("RDSVM_CACHE", "/x/y")
	if d, _ := CacheDir(); d != "/x/y" {
		t.Fatalf("RDSVM_CACHE: %s", d)
	}
	t.Setenv("RDSVM_CACHE", "")
	t.Setenv("XDG_CACHE_HOME", "/c")
	if d, _ := CacheDir(); d != "/c/go-rds-vm" {
		t.Fatalf("XDG_CACHE_HOME: %s", d)
	}
}
