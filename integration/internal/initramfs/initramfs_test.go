package initramfs

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/cavaliergopher/cpio"
)

func TestBuilderRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	b := New(&buf)
	if err := b.Bytes("/a/b/c.txt", []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := b.Symlink("/sbin/modprobe", "/init"); err != nil {
		t.Fatal(err)
	}
	if err := b.Bytes("a/b/c.txt", []byte("again"), 0o644); err == nil {
		t.Fatal("duplicate entry accepted")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	r := cpio.NewReader(&buf)
	got := map[string]string{}
	var order []string
	for {
		h, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(r)
		if h.Mode&cpio.ModeType == cpio.TypeSymlink {
			data = []byte(h.Linkname)
		}
		got[h.Name] = string(data)
		order = append(order, h.Name)
	}
	want := []string{"a", "a/b", "a/b/c.txt", "sbin", "sbin/modprobe"}
	if len(order) != len(want) {
		t.Fatalf("entries %q, want %q", order, want)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("entries %q, want %q", order, want)
		}
	}
	if got["a/b/c.txt"] != "hello" || got["sbin/modprobe"] != "/init" {
		t.Fatalf("contents %q", got)
	}
}

func TestSharedLibs(t *testing.T) {
	// The test binary itself: static or dynamic depending on cgo; both must
	// be handled, and a dynamic one must list its interpreter first.
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	static, err := IsStatic(exe)
	if err != nil {
		t.Fatal(err)
	}
	libs, err := SharedLibs(exe)
	if err != nil {
		t.Fatal(err)
	}
	if static != (len(libs) == 0) {
		t.Fatalf("static=%v but SharedLibs=%q", static, libs)
	}
	// A C program is always dynamic on Debian.
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	libs, err = SharedLibs(sh)
	if err != nil {
		t.Fatal(err)
	}
	if len(libs) < 2 || filepath.Base(libs[0]) != "ld-linux-x86-64.so.2" {
		t.Fatalf("SharedLibs(%s) = %q: want the interpreter first and libc", sh, libs)
	}
	hasLibc := false
	for _, l := range libs {
		if filepath.Base(l) == "libc.so.6" {
			hasLibc = true
		}
	}
	if !hasLibc {
		t.Fatalf("SharedLibs(%s) = %q: no libc.so.6", sh, libs)
	}
}
