//go:build linux

package kernel

import (
	"bytes"
	"compress/gzip"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
)

// BootImage is the image to hand to qemu's -kernel: the uncompressed
// kernel, an ELF file that qemu starts at its PVH entry point, when Fetch
// could unpack it from the bzImage; else Image. Under TCG the bzImage's
// own decompressor is slow: it took 5 of a 6.1 VM's 10 s boot (xz) and
// about 2 s on 6.12 (zstd), before the kernel printed its first line.
func (k *Kernel) BootImage() string {
	if k.vmlinux != "" {
		return k.vmlinux
	}
	return k.image
}

// vmlinuxName is the unpacked kernel's file name in the extracted tree.
const vmlinuxName = "vmlinux.pvh"

// unpackVmlinux makes k.vmlinux: once per cached tree, under Fetch's lock.
// A kernel that cannot be unpacked (a compression this code does not
// know, a missing xz or zstd command, no PVH entry point) keeps booting
// its bzImage; the reason is logged.
func unpackVmlinux(k *Kernel, logf func(format string, args ...any)) {
	dst := filepath.Join(k.Root, vmlinuxName)
	if _, err := os.Stat(dst); err == nil {
		k.vmlinux = dst
		return
	}
	img, err := os.ReadFile(k.image)
	if err == nil {
		var elfImage []byte
		if elfImage, err = vmlinuxOf(img); err == nil {
			err = writeAtomic(dst, elfImage)
		}
	}
	if err != nil {
		logf("kernel %s boots from its compressed image (slower under TCG): %v", k.Release, err)
		return
	}
	k.vmlinux = dst
}

// vmlinuxOf extracts the ELF kernel from a bzImage and checks that it has
// the PVH entry note qemu needs to boot it directly.
func vmlinuxOf(bz []byte) ([]byte, error) {
	payload, err := bzPayload(bz)
	if err != nil {
		return nil, err
	}
	out, err := decompress(payload)
	if err != nil {
		return nil, err
	}
	f, err := elf.NewFile(bytes.NewReader(out))
	if err != nil {
		return nil, fmt.Errorf("the decompressed payload is not an ELF file: %w", err)
	}
	if !hasPVHNote(f) {
		return nil, errors.New("the kernel has no PVH entry point (CONFIG_PVH)")
	}
	return out, nil
}

// bzPayload returns the compressed kernel inside a bzImage, as located by
// the x86 boot protocol's setup header (Documentation/arch/x86/boot.rst):
// setup_sects at 0x1f1, the "HdrS" magic at 0x202, payload_offset and
// payload_length at 0x248, both relative to the protected-mode code that
// follows the setup sectors.
func bzPayload(bz []byte) ([]byte, error) {
	if len(bz) < 0x250 || string(bz[0x202:0x206]) != "HdrS" {
		return nil, errors.New("not a bzImage (no HdrS setup header)")
	}
	if v := binary.LittleEndian.Uint16(bz[0x206:]); v < 0x208 {
		return nil, fmt.Errorf("boot protocol %#x has no payload fields (need 2.08)", v)
	}
	setup := int(bz[0x1f1])
	if setup == 0 {
		setup = 4
	}
	start := (setup+1)*512 + int(binary.LittleEndian.Uint32(bz[0x248:]))
	n := int(binary.LittleEndian.Uint32(bz[0x24c:]))
	if start < 0 || n <= 0 || start+n > len(bz) {
		return nil, fmt.Errorf("payload [%d, +%d) outside the %d-byte image", start, n, len(bz))
	}
	return bz[start : start+n], nil
}

// decompress undoes the kernel build's compression of the payload. For xz
// and zstd, the build appends the uncompressed size as 4 little-endian
// bytes (scripts/Makefile.lib, size_append); it is checked here.
func decompress(p []byte) ([]byte, error) {
	var tool, pkg string // the command, and the Debian package holding it
	switch {
	case bytes.HasPrefix(p, []byte{0x1f, 0x8b}):
		r, err := gzip.NewReader(bytes.NewReader(p))
		if err != nil {
			return nil, err
		}
		r.Multistream(false)
		return io.ReadAll(r)
	case bytes.HasPrefix(p, []byte("\xfd7zXZ\x00")):
		tool, pkg = "xz", "xz-utils"
	case bytes.HasPrefix(p, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		tool, pkg = "zstd", "zstd"
	default:
		return nil, fmt.Errorf("payload compression with magic % x is not handled", p[:min(len(p), 6)])
	}
	if len(p) < 4 {
		return nil, errors.New("payload too short")
	}
	size := binary.LittleEndian.Uint32(p[len(p)-4:])
	cmd := exec.Command(tool, "-dc")
	cmd.Stdin = bytes.NewReader(p[:len(p)-4])
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s -dc: %v: %s (install the %s package to boot faster)", tool, err, bytes.TrimSpace(stderr.Bytes()), pkg)
	}
	if uint32(out.Len()) != size {
		return nil, fmt.Errorf("%s gave %d bytes; the image says %d", tool, out.Len(), size)
	}
	return out.Bytes(), nil
}

// hasPVHNote reports whether f carries XEN_ELFNOTE_PHYS32_ENTRY (type 18,
// owner "Xen"), the 32-bit entry point qemu uses to boot an ELF kernel.
func hasPVHNote(f *elf.File) bool {
	const phys32Entry = 18
	for _, p := range f.Progs {
		if p.Type != elf.PT_NOTE {
			continue
		}
		b, err := io.ReadAll(p.Open())
		if err != nil {
			continue
		}
		for len(b) >= 12 {
			namesz := int(f.ByteOrder.Uint32(b[0:]))
			descsz := int(f.ByteOrder.Uint32(b[4:]))
			typ := f.ByteOrder.Uint32(b[8:])
			nameEnd := 12 + (namesz+3)&^3
			end := nameEnd + (descsz+3)&^3
			if namesz < 0 || descsz < 0 || end > len(b) {
				break
			}
			if typ == phys32Entry && string(bytes.TrimRight(b[12:12+namesz], "\x00")) == "Xen" {
				return true
			}
			b = b[end:]
		}
	}
	return false
}

// writeAtomic writes data to path through a temporary file in the same
// directory, so that a reader sees the whole file or none.
func writeAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}
