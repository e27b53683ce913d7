// Package initramfs writes newc cpio archives for the Linux kernel to unpack
// as its initial root filesystem, and finds the shared libraries a dynamically
// linked ELF program needs.
package initramfs

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/cavaliergopher/cpio"
)

// Builder writes an initramfs. Parent directories are created implicitly;
// the kernel's unpacker does not create them itself.
type Builder struct {
	w       *cpio.Writer
	entries map[string]bool
	mtime   time.Time
}

// New returns a Builder writing to w. Call Close to finish the archive.
func New(w io.Writer) *Builder {
	return &Builder{w: cpio.NewWriter(w), entries: make(map[string]bool), mtime: time.Unix(1, 0)}
}

func clean(p string) string { return strings.TrimPrefix(path.Clean("/"+p), "/") }

// Dir adds directory p (and its parents).
func (b *Builder) Dir(p string) error {
	p = clean(p)
	if p == "" || p == "." || b.entries[p] {
		return nil
	}
	if err := b.Dir(path.Dir(p)); err != nil {
		return err
	}
	b.entries[p] = true
	return b.w.WriteHeader(&cpio.Header{Name: p, Mode: cpio.TypeDir | 0o755, Links: 2, ModTime: b.mtime})
}

// Bytes adds a regular file with the given content and permission bits.
func (b *Builder) Bytes(p string, data []byte, perm os.FileMode) error {
	return b.Reader(p, int64(len(data)), strings.NewReader(string(data)), perm)
}

// Reader adds a regular file of size bytes read from r.
func (b *Builder) Reader(p string, size int64, r io.Reader, perm os.FileMode) error {
	p = clean(p)
	if b.entries[p] {
		return fmt.Errorf("initramfs: duplicate entry %s", p)
	}
	if err := b.Dir(path.Dir(p)); err != nil {
		return err
	}
	b.entries[p] = true
	hdr := &cpio.Header{Name: p, Mode: cpio.TypeReg | cpio.FileMode(perm.Perm()), Size: size, ModTime: b.mtime}
	if err := b.w.WriteHeader(hdr); err != nil {
		return err
	}
	n, err := io.Copy(b.w, r)
	if err == nil && n != size {
		err = fmt.Errorf("initramfs: %s: wrote %d of %d bytes", p, n, size)
	}
	return err
}

// File adds the host file src (symlinks followed) as p, keeping its
// permission bits.
func (b *Builder) File(p, src string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("initramfs: %s is not a regular file", src)
	}
	return b.Reader(p, st.Size(), f, st.Mode())
}

// Symlink adds a symbolic link p pointing to target.
func (b *Builder) Symlink(p, target string) error {
	p = clean(p)
	if err := b.Dir(path.Dir(p)); err != nil {
		return err
	}
	b.entries[p] = true
	hdr := &cpio.Header{Name: p, Mode: cpio.TypeSymlink | 0o777, Size: int64(len(target)), ModTime: b.mtime}
	if err := b.w.WriteHeader(hdr); err != nil {
		return err
	}
	_, err := io.WriteString(b.w, target)
	return err
}

// Tree copies the host directory src to p: directories and regular files
// (symlinks followed). Other file types are skipped.
func (b *Builder) Tree(p, src string) error {
	return filepath.WalkDir(src, func(hp string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, hp)
		if err != nil {
			return err
		}
		dst := path.Join(p, filepath.ToSlash(rel))
		st, err := os.Stat(hp)
		if err != nil {
			return err
		}
		switch {
		case st.IsDir():
			return b.Dir(dst)
		case st.Mode().IsRegular():
			return b.File(dst, hp)
		}
		return nil
	})
}

// Has reports whether p was added.
func (b *Builder) Has(p string) bool { return b.entries[clean(p)] }

// Close writes the trailer. It does not close the underlying writer.
func (b *Builder) Close() error { return b.w.Close() }
