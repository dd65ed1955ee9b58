// Package outfile writes the files the sframe tool's commands produce
// (gen's and convert's ELF files and sections, stack's profiles), the
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
	if path == "-" {
		if stdout == nil {
			stdout = os.Stdout
		}
		if _, err := stdout.Write(data); err != nil {
			return fmt.Errorf("standard output: %w", err)
		}
		return nil
	}
	// Stat follows every link, /proc's magic ones too, which readlink
	// cannot always resolve to a name (pipe:[1234]).
	if fi, err := os.Stat(path); err == nil {
		switch {
		case fi.IsDir():
			return fmt.Errorf("%s: is a directory", path)
		case !fi.Mode().IsRegular():
			return writeInto(path, data)
		}
	}
	target, err := resolve(path)
	if err != nil {
		return err
	}
	return replace(path, target, data, perm)
}

// writeInto writes data into the existing non-regular file at path.
func writeInto(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return named(path, err)
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return named(path, err)
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

// replace writes data to target through a temporary file in its
// directory and a rename; errors name path, the name given.
func replace(path, target string, data []byte, perm fs.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(target), "."+filepath.Base(target)+".tmp*")
	if err != nil {
		return named(path, err)
	}
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(perm)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), target)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return named(path, err)
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
