// Package outfile writes the files the sframe tool's commands produce
// (gen's and convert's ELF files and sections, the profiles of stack,
// report and record, report's streamed text), the
// same way for all of them:
//
//   - "-" is standard output;
//   - an existing device, FIFO or other non-regular file (reached
//     directly or through symbolic links, /proc/self/fd/N included) is
//     written to, never replaced: /dev/null stays a device, a FIFO
//     stays a FIFO;
//   - a regular file is replaced atomically, through a temporary file
//     in its directory and a rename, so that readers never see half a
//     file and a failure leaves the old one; a symbolic link at the path
//     is followed and its target replaced, the link kept;
//   - a directory is an error that says so.
//
// Errors name the path given, not the temporary file, and include the
// errors of the final write and close (ENOSPC from /dev/full, a full
// disk, a closed pipe).
package outfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// maxLinks bounds the symbolic links followed from the path, as the
// kernel's own limit (40) does.
const maxLinks = 40

// Write writes data to the file named path, as the package comment says,
// with stdout (os.Stdout when nil) standing for "-". A file it creates
// (or replaces) gets the permissions perm, whatever the umask.
func Write(path string, data []byte, perm fs.FileMode, stdout io.Writer) error {
	f, err := Create(path, perm, stdout)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Abort()
		return err
	}
	return f.Commit()
}

// File is an output being written by Create: for output too large to
// hold in memory (a report streamed as it is made). Nothing is replaced
// until Commit.
type File struct {
	path   string    // the name given, for errors
	w      io.Writer // standard output, or f
	f      *os.File  // a non-regular file written into, or the temporary file
	target string    // with a temporary file: the file Commit replaces
	perm   fs.FileMode
}

// Create opens path for writing, as the package comment says, with
// stdout (os.Stdout when nil) standing for "-": a non-regular file is
// opened in place, a regular one is written to a temporary file that
// Commit renames over it with the permissions perm (Abort removes it).
func Create(path string, perm fs.FileMode, stdout io.Writer) (*File, error) {
	if path == "-" {
		if stdout == nil {
			stdout = os.Stdout
		}
		return &File{path: "standard output", w: stdout}, nil
	}
	// Stat follows every link, /proc's magic ones too, which readlink
	// cannot always resolve to a name (pipe:[1234]).
	if fi, err := os.Stat(path); err == nil {
		switch {
		case fi.IsDir():
			return nil, fmt.Errorf("%s: is a directory", path)
		case !fi.Mode().IsRegular():
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				return nil, named(path, err)
			}
			return &File{path: path, w: f, f: f}, nil
		}
	}
	target, err := resolve(path)
	if err != nil {
		return nil, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(target), "."+filepath.Base(target)+".tmp*")
	if err != nil {
		return nil, named(path, err)
	}
	return &File{path: path, w: tmp, f: tmp, target: target, perm: perm}, nil
}

// Write writes p; its errors name the path given.
func (f *File) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	if err != nil {
		if f.f == nil {
			return n, fmt.Errorf("standard output: %w", err)
		}
		return n, named(f.path, err)
	}
	return n, nil
}

// Commit finishes the output: a file written into is closed (its close
// error reported), a temporary file is given its permissions, synced
// and renamed over the target.
func (f *File) Commit() error {
	if f.f == nil {
		return nil
	}
	tmp := f.f
	f.f = nil
	if f.target == "" {
		return named(f.path, tmp.Close())
	}
	err := tmp.Chmod(f.perm)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), f.target)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return named(f.path, err)
}

// Abort drops the output: a temporary file is removed, the file it
// stood for left as it was. It does nothing after Commit.
func (f *File) Abort() {
	if f.f == nil {
		return
	}
	f.f.Close()
	if f.target != "" {
		os.Remove(f.f.Name())
	}
	f.f = nil
}

// resolve follows the symbolic links at path (the last component; the
// directories on the way are followed by the system) to the name of the
// file to replace or create.
func resolve(path string) (string, error) {
	p := path
	for range maxLinks {
		fi, err := os.Lstat(p)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			return p, nil
		}
		t, err := os.Readlink(p)
		if err != nil {
			return "", named(path, err)
		}
		if !filepath.IsAbs(t) {
			t = filepath.Join(filepath.Dir(p), t)
		}
		p = t
	}
	return "", fmt.Errorf("%s: too many levels of symbolic links", path)
}

// named reports err, an error about path or the temporary file standing
// for it, under the name path.
func named(path string, err error) error {
	if err == nil {
		return nil
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %s: %w", path, pe.Op, pe.Err)
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return fmt.Errorf("%s: %s: %w", path, le.Op, le.Err)
	}
	return fmt.Errorf("%s: %w", path, err)
}
