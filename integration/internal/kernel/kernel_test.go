//go:build linux

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
	if err == nil || !strings.Contains(err.Error(), "6.1, 6.12, sid") {
		t.Fatalf("unknown alias: %v, want an error listing the aliases", err)
	}
	ref, err := resolvePackage(t.TempDir(), "linux-image-6.1.0-56-amd64", func(string, ...any) {})
	if err != nil || ref != (pkgRef{pkg: "linux-image-6.1.0-56-amd64"}) || ref.dirName() != ref.pkg {
		t.Fatalf("package name: %+v, %v", ref, err)
	}
	// A pinned version comes from Debian unstable and is cached by version.
	ref, err = resolvePackage(t.TempDir(), "linux-image-7.2.13+deb14-amd64=7.2.13-1", func(string, ...any) {})
	want := pkgRef{pkg: "linux-image-7.2.13+deb14-amd64", version: "7.2.13-1", suite: "sid"}
	if err != nil || ref != want || ref.dirName() != "linux-image-7.2.13+deb14-amd64_7.2.13-1" {
		t.Fatalf("pinned package: %+v, %v", ref, err)
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

// TestOpenUsrLayout: Debian's newest kernels keep the image and the modules
// under usr/lib/modules/REL.
func TestOpenUsrLayout(t *testing.T) {
	root := t.TempDir()
	rel := "7.2.13+deb14-amd64"
	for _, f := range []string{".complete", "usr/lib/modules/" + rel + "/vmlinuz", "usr/lib/modules/" + rel + "/modules.dep"} {
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
	mods := filepath.Join(root, "usr", "lib", "modules", rel)
	if k.Release != rel || k.Image() != filepath.Join(mods, "vmlinuz") || k.ModulesDir() != mods {
		t.Fatalf("open = %+v", k)
	}
	if k.Spec() != "linux-image-"+rel {
		t.Fatalf("Spec without version = %q", k.Spec())
	}
	k.Version = "7.2.13-1"
	if k.Spec() != "linux-image-"+rel+"=7.2.13-1" {
		t.Fatalf("Spec = %q", k.Spec())
	}
	// Both layouts at once would be ambiguous only with two releases;
	// two releases in one directory are refused.
	os.MkdirAll(filepath.Join(mods+"-other"), 0o755)
	if _, err := open("linux-image-"+rel, root); err == nil {
		t.Fatal("two releases under usr/lib/modules were accepted")
	}
}

func TestParseControl(t *testing.T) {
	out := []byte(`Package: linux-image-7.2.13+deb14-amd64
Source: linux-signed-amd64
Version: 7.2.13-1
Depends: dracut | initramfs-tools (>= 0.120+deb8u2) | linux-initramfs-tool, linux-base-7.2.13+deb14-amd64 (= 7.2.13-1), linux-binary-7.2.13+deb14-amd64 (= 7.2.13-1), linux-modules-7.2.13+deb14-amd64 (= 7.2.13-1)
Description: Linux 7.2.13 for 64-bit PCs (signed)
 The Linux kernel 7.2.13 and modules for use on PCs.
Version-Tail: x

Package: linux-image-7.2.12+deb14-amd64
Version: 7.2.12-1
`)
	m := parseControl(out)
	if m["Package"] != "linux-image-7.2.13+deb14-amd64" || m["Version"] != "7.2.13-1" || m["Version-Tail"] != "x" {
		t.Fatalf("parseControl = %q", m)
	}
	got := splitPackages(m["Package"], m["Depends"])
	want := []string{
		"linux-base-7.2.13+deb14-amd64=7.2.13-1",
		"linux-binary-7.2.13+deb14-amd64=7.2.13-1",
		"linux-modules-7.2.13+deb14-amd64=7.2.13-1",
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("splitPackages:\n got %q\nwant %q", got, want)
	}
	// An image package holding its own files depends on no linux-*-KVER.
	if got := splitPackages("linux-image-6.1.0-56-amd64", "kmod, linux-base (>= 4.3~), initramfs-tools (>= 0.120+deb8u2) | linux-initramfs-tool"); len(got) != 0 {
		t.Fatalf("splitPackages of a 6.1 image = %q", got)
	}
}
