//go:build linux

package kernel

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// testELF builds a minimal 64-bit ELF file whose one PT_NOTE segment holds
// a note of the given owner and type.
func testELF(owner string, typ uint32) []byte {
	le := binary.LittleEndian
	name := append([]byte(owner), 0)
	for len(name)%4 != 0 {
		name = append(name, 0)
	}
	note := le.AppendUint32(nil, uint32(len(owner)+1))
	note = le.AppendUint32(note, 4)
	note = le.AppendUint32(note, typ)
	note = append(note, name...)
	note = le.AppendUint32(note, 0x1000000) // the entry address

	const ehsize, phsize = 64, 56
	b := make([]byte, ehsize+phsize)
	copy(b, "\x7fELF")
	b[4], b[5], b[6] = 2, 1, 1 // 64-bit, little-endian, version 1
	le.PutUint16(b[16:], 2)    // ET_EXEC
	le.PutUint16(b[18:], 62)   // EM_X86_64
	le.PutUint32(b[20:], 1)
	le.PutUint64(b[32:], ehsize) // phoff
	le.PutUint16(b[52:], ehsize)
	le.PutUint16(b[54:], phsize)
	le.PutUint16(b[56:], 1) // phnum
	ph := b[ehsize:]
	le.PutUint32(ph[0:], 4)                  // PT_NOTE
	le.PutUint64(ph[8:], ehsize+phsize)      // offset
	le.PutUint64(ph[32:], uint64(len(note))) // filesz
	le.PutUint64(ph[40:], uint64(len(note))) // memsz
	le.PutUint64(ph[48:], 4)                 // align
	return append(b, note...)
}

// testBzImage wraps payload in a bzImage setup header of 2 setup sectors,
// the payload 16 bytes into the protected-mode code.
func testBzImage(payload []byte) []byte {
	const setupSects, pad = 2, 16
	b := make([]byte, (setupSects+1)*512+pad)
	b[0x1f1] = setupSects
	copy(b[0x202:], "HdrS")
	binary.LittleEndian.PutUint16(b[0x206:], 0x20f)
	binary.LittleEndian.PutUint32(b[0x248:], pad)
	binary.LittleEndian.PutUint32(b[0x24c:], uint32(len(payload)))
	return append(append(b, payload...), "trailing setup data"...)
}

func gzipped(t *testing.T, b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write(b)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// xzKernel compresses b as the kernel build does: an xz stream followed by
// the uncompressed size (here: size, to allow a wrong one).
func xzKernel(t *testing.T, b []byte, size uint32) []byte {
	cmd := exec.Command("xz", "-c", "--check=crc32")
	cmd.Stdin = bytes.NewReader(b)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("xz (the harness needs xz-utils installed): %v", err)
	}
	return binary.LittleEndian.AppendUint32(out, size)
}

func TestVmlinuxOf(t *testing.T) {
	pvh := testELF("Xen", 18)
	for _, c := range []struct {
		name    string
		payload []byte
		want    []byte
		err     string
	}{
		{"gzip", gzipped(t, pvh), pvh, ""},
		{"xz", xzKernel(t, pvh, uint32(len(pvh))), pvh, ""},
		{"xz with a wrong size", xzKernel(t, pvh, uint32(len(pvh)+1)), nil, "the image says"},
		{"no PVH note", gzipped(t, testELF("Xen", 17)), nil, "no PVH entry point"},
		{"a note of another owner", gzipped(t, testELF("GNU", 18)), nil, "no PVH entry point"},
		{"not an ELF file", gzipped(t, []byte("kernel")), nil, "not an ELF file"},
		{"an unknown compression", []byte("BZh91AY&SY"), nil, "is not handled"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := vmlinuxOf(testBzImage(c.payload))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one saying %q", err, c.err)
				}
				return
			}
			if err != nil || !bytes.Equal(got, c.want) {
				t.Fatalf("got %d bytes, %v; want the %d-byte ELF", len(got), err, len(c.want))
			}
		})
	}
}

func TestBzPayloadRefusesBadHeaders(t *testing.T) {
	good := testBzImage([]byte("payload"))
	old := bytes.Clone(good)
	binary.LittleEndian.PutUint16(old[0x206:], 0x206)
	long := bytes.Clone(good)
	binary.LittleEndian.PutUint32(long[0x24c:], 1<<20)
	for name, img := range map[string][]byte{
		"no header":            make([]byte, 4096),
		"short":                good[:0x100],
		"boot protocol 2.06":   old,
		"payload past the end": long,
	} {
		if _, err := bzPayload(img); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if p, err := bzPayload(good); err != nil || string(p) != "payload" {
		t.Fatalf("good image: %q, %v", p, err)
	}
}

// TestUnpackVmlinux checks that Fetch's step writes the unpacked kernel
// once, that BootImage then names it, and that an image it cannot unpack
// keeps booting as it is.
func TestUnpackVmlinux(t *testing.T) {
	root := t.TempDir()
	img := filepath.Join(root, "vmlinuz")
	if err := os.WriteFile(img, testBzImage(gzipped(t, testELF("Xen", 18))), 0o644); err != nil {
		t.Fatal(err)
	}
	k := &Kernel{Release: "test", Root: root, image: img}
	var logs []string
	logf := func(f string, a ...any) { logs = append(logs, f) }
	unpackVmlinux(k, logf)
	want := filepath.Join(root, vmlinuxName)
	if k.BootImage() != want || len(logs) != 0 {
		t.Fatalf("BootImage %s, logs %q; want %s", k.BootImage(), logs, want)
	}
	if st, err := os.Stat(want); err != nil || st.Mode().Perm() != 0o644 {
		t.Fatalf("unpacked kernel: %v, %v", st, err)
	}
	// A later Fetch finds it without reading the image again.
	os.Remove(img)
	k2 := &Kernel{Release: "test", Root: root, image: img}
	unpackVmlinux(k2, logf)
	if k2.BootImage() != want {
		t.Fatalf("second unpack: BootImage %s", k2.BootImage())
	}

	bad := t.TempDir()
	badImg := filepath.Join(bad, "vmlinuz")
	os.WriteFile(badImg, []byte("not a kernel"), 0o644)
	k3 := &Kernel{Release: "test", Root: bad, image: badImg}
	unpackVmlinux(k3, logf)
	if k3.BootImage() != badImg || len(logs) != 1 {
		t.Fatalf("unusable image: BootImage %s, logs %q; want the image itself and one log line", k3.BootImage(), logs)
	}
	if ents, _ := os.ReadDir(bad); len(ents) != 1 {
		t.Fatalf("unusable image left files behind: %v", ents)
	}
}
