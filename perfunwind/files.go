package perfunwind

import (
	"bytes"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/elffile"
	"github.com/sframekit/sframekit/internal/procmaps"
	"github.com/sframekit/sframekit/internal/slab"
	"github.com/sframekit/sframekit/internal/sysfile"
	"github.com/sframekit/sframekit/perfdata"
)

// File is an object file that a recording's mappings name: found on disk
// (under Options.SymFS), in perf's build-ID cache, in a process that maps
// it (Options.Live, openMapped), or, for the vDSO, in this process's
// memory. Files are shared by every process mapping them
// and never change once found.
type File struct {
	// Name is the file name as the recording gives it.
	Name string
	// Path is the file opened for Name: Name itself, under SymFS, or a
	// copy in the build-ID cache; "" when none was usable (see Err).
	Path string
	// BuildID is the recorded build ID, else the file's own; nil when
	// neither is known.
	BuildID []byte
	// Err says why no file was usable: missing, not ELF, another build.
	Err error

	segs  []loadSeg       // PT_LOAD headers, for load biases
	r     io.ReaderAt     // the file's bytes, for reads the unwinder makes outside the stack
	close func() error    // releases r
	size  int64           // of the file
	key   string          // the symbolizer's name for the file
	image []byte          // the vDSO's image, when it is not a file on disk
	locs  map[uint64]*Loc // resolved addresses (ELF addresses), see Resolver
	slab  slab.Slab[Loc]  // room for the next of locs (Resolver.lookup)
}

// loadSeg is one PT_LOAD program header.
type loadSeg struct {
	off, vaddr, filesz uint64
	exec               bool
}

// bias returns the load bias of a mapping of the file at runtime address
// start with file offset pgoff: runtime address = ELF address + bias. The
// segment holding pgoff gives it (mappings start on a page boundary, so
// pgoff may lie up to a page below the segment's offset); without one,
// the file's offsets are taken for its addresses, as perf does.
func (f *File) bias(start, pgoff uint64) uint64 {
	best := -1
	for i, s := range f.segs {
		lo := s.off &^ 0xffff // any page size up to 64 KiB
		if pgoff >= lo && pgoff < s.off+max(s.filesz, 1) {
			if best < 0 || s.exec && !f.segs[best].exec || s.off <= pgoff && f.segs[best].off > pgoff {
				best = i
			}
		}
	}
	if best < 0 {
		return start - pgoff
	}
	s := f.segs[best]
	return start - (s.vaddr - s.off + pgoff)
}

// ReadAt reads the file's bytes (the vDSO's image for the vDSO).
func (f *File) ReadAt(p []byte, off int64) (int, error) {
	if f.r == nil {
		return 0, fmt.Errorf("%s: %w", f.Name, errNoFile)
	}
	return f.r.ReadAt(p, off)
}

// Size returns the file's size in bytes (the vDSO image's for the vDSO;
// 0 when the file was not found), for elffile.NewFileAt.
func (f *File) Size() int64 {
	if f.image != nil {
		return int64(len(f.image))
	}
	return f.size
}

var errNoFile = errors.New("file not found")

// fileKey identifies a file of the recording: its name and, when
// recorded, its build ID, else its device and inode (a path that held two
// builds during the recording is two files, and so is a path that names
// another file in each of two mount namespaces, whose file systems, two
// tmpfs or squashfs mounts, may number their files alike).
type fileKey struct {
	name, buildID string
	fileID
}

// fileID is the device and inode of a mapped file as an MMAP2 record or
// /proc/PID/maps gives them; zero where neither was recorded.
type fileID struct {
	major, minor uint32
	ino          uint64
}

// mmapFileID returns the device and inode of the file of MMAP record m
// (zero for an MMAP record, or an MMAP2 one carrying a build ID instead).
func mmapFileID(m *perfdata.Mmap) fileID {
	if m.HasBuildID {
		return fileID{}
	}
	return fileID{m.Maj, m.Min, m.Ino}
}

// sameDevice reports whether st is on the device of fid, when both say
// which (true when either does not).
func (fid fileID) sameDevice(st os.FileInfo) bool {
	major, minor, ok := sysfile.Device(st)
	return !ok || fid == (fileID{}) || fid.ino == 0 || major == fid.major && minor == fid.minor
}

// openFile finds the file recorded as name with build ID id (nil when the
// recording has none), as perf does: the path under symfs if its build
// ID matches, else perf's build-ID cache. A file whose build ID differs
// from the recorded one is refused: its tables and symbols would be
// another program's. Without build IDs, a file at the recorded path on
// the recording's machine is refused when it is not the file recorded
// with inode ino, or was modified after the recording (see
// Options.SameMachine). An id from the recording's table (fromTable) is
// what perf record read at the path when it ended: a file of another
// inode than the mapped one that came there during the recording is
// where it read it, so that neither that file nor its copy in the
// build-ID cache is the mapped one (replacedDuring).
func (s *Session) openFile(name string, id []byte, ino uint64, fromTable bool) *File {
	f := &File{Name: name, BuildID: id, locs: map[uint64]*Loc{}}
	var tried []string
	noCache := false // the build-ID cache holds the recorded ID's file, not the mapped one
	// at names path in an error once ("PATH: what is wrong"), not as
	// a file system error names it again.
	at := func(path string, err error) error {
		var pe *fs.PathError
		if errors.As(err, &pe) && pe.Path == path {
			err = pe.Err
		}
		return fmt.Errorf("%s: %w", path, err)
	}
	try := func(path string) bool {
		tried = append(tried, path)
		// Only a regular file: a FIFO or device named by the
		// recording must not block or disturb the report.
		osf, err := sysfile.OpenRegular(path)
		if err != nil {
			if f.Err == nil {
				f.Err = at(path, err)
			}
			return false
		}
		st, err := osf.Stat()
		if err != nil {
			osf.Close()
			if f.Err == nil {
				f.Err = at(path, err)
			}
			return false
		}
		segs, own, err := readELFInfo(osf, st.Size())
		if err != nil {
			osf.Close()
			f.Err = at(path, err)
			return false
		}
		if len(id) > 0 && len(own) > 0 && !sameBuildID(id, own) {
			osf.Close()
			f.Err = at(path, fmt.Errorf("build ID %x, recorded %x", own, id))
			return false
		}
		if fromTable && len(own) > 0 && s.opts.SymFS == "" && len(tried) == 1 {
			// The file at the recorded path (not the build-ID
			// cache's copy, another inode by nature).
			if err := s.replacedDuring(st, ino); err != nil {
				osf.Close()
				f.Err, noCache = at(path, err), true
				return false
			}
		}
		if len(id) == 0 && len(own) == 0 && s.opts.SymFS == "" {
			if err := s.notRecorded(st, ino); err != nil {
				osf.Close()
				f.Err = err
				return false
			}
		}
		f.Path, f.segs, f.r, f.close, f.key, f.size, f.Err = path, segs, osf, osf.Close, path, st.Size(), nil
		if len(f.BuildID) == 0 {
			f.BuildID = own
		}
		return true
	}
	if name == "[vdso]" {
		if s.vdsoFile(f) {
			return f
		}
	} else if filepath.IsAbs(name) && try(sysfile.Under(s.opts.SymFS, name)) {
		return f
	}
	if len(id) > 0 && s.buildIDDir != "" && !noCache {
		h := hex.EncodeToString(trimBuildID(id))
		if len(h) > 2 {
			dir := filepath.Join(s.buildIDDir, ".build-id", h[:2], h[2:])
			for _, leaf := range []string{"elf", "vdso"} {
				if _, err := os.Stat(filepath.Join(dir, leaf)); err == nil && try(filepath.Join(dir, leaf)) {
					return f
				}
			}
		}
	}
	if f.Err == nil {
		f.Err = errNoFile
	}
	return f
}

// liveMapping is where a running process maps a file: the range names
// the file in /proc/PID/map_files.
type liveMapping struct {
	pid        uint32
	start, end uint64
}

// openLive finds the file that a running process maps (Options.Live)
// from name, recorded with device and inode fid (zero: not recorded): at
// lookup (name without " (deleted)") if the file there is that inode on
// that device, else through /proc/PID/map_files at the mapping's range,
// which gives the mapped file itself while the process maps it: deleted,
// replaced by another build, a memfd, or another file at that path in
// the process's mount namespace (whose file system, a tmpfs or squashfs,
// may number its files as this one's at the path does). perf would read
// such a file at its path after the recording, and name the code with
// whatever it finds there. Last, where map_files is not ours to read
// (it takes CAP_SYS_ADMIN), lookup in the process's own root
// (/proc/PID/root) if the file there is that inode: the device is not
// compared there, as btrfs reports a subvolume's in stat and its
// superblock's in MMAP2 records.
//
// The file is then known by its descriptor, /proc/self/fd/N (Path): the
// unwinder and symbolizer open it again by path, and the recorded path
// may hold another file by then (another build of a library, mapped by
// the processes started after it was replaced). A separate debug file
// is still found by build ID or by a debug link beside the path the
// descriptor was opened from (symbolize.FindDebugFile).
//
// A recording read later (report: see openMapped) has its path tried
// already and looks in the process only: a file in its root must then
// be on the mapped device too, and a file known by build ID (id, from
// the MMAP record; fid zero) must have that build ID.
func (s *Session) openLive(name, lookup string, deleted bool, fid fileID, id []byte, at *liveMapping, report bool) *File {
	f := &File{Name: name, locs: map[uint64]*Loc{}}
	ino := fid.ino
	var errs []string
	try := func(path string, sameDevice bool) bool {
		osf, err := sysfile.OpenRegular(path)
		if err != nil {
			var pe *fs.PathError
			if errors.As(err, &pe) && pe.Path == path {
				err = pe.Err
			}
			errs = append(errs, fmt.Sprintf("%s: %v", path, err))
			return false
		}
		st, err := osf.Stat()
		if err == nil && ino != 0 {
			if got := sysfile.Inode(st); got != 0 && got != ino {
				err = fmt.Errorf("another file (inode %d, mapped %d)", got, ino)
			} else if sameDevice && !fid.sameDevice(st) {
				major, minor, _ := sysfile.Device(st)
				err = fmt.Errorf("another file (device %02x:%02x, mapped %02x:%02x)", major, minor, fid.major, fid.minor)
			}
		}
		var segs []loadSeg
		var own []byte
		if err == nil {
			segs, own, err = readELFInfo(osf, st.Size())
		}
		if err == nil && len(id) > 0 && !sameBuildID(id, own) {
			err = fmt.Errorf("build ID %x, recorded %x", own, id)
		}
		if err != nil {
			osf.Close()
			errs = append(errs, fmt.Sprintf("%s: %v", path, err))
			return false
		}
		fd := fmt.Sprintf("/proc/self/fd/%d", osf.Fd())
		f.Path, f.segs, f.r, f.close, f.key, f.size, f.BuildID = fd, segs, osf, osf.Close, fd, st.Size(), own
		return true
	}
	if !report && !deleted && filepath.IsAbs(lookup) && try(lookup, true) {
		return f
	}
	if at != nil && try(fmt.Sprintf("/proc/%d/map_files/%x-%x", at.pid, at.start, at.end), false) {
		return f
	}
	if at != nil && !deleted && (ino != 0 || len(id) > 0) && filepath.IsAbs(lookup) && try(fmt.Sprintf("/proc/%d/root%s", at.pid, lookup), report) {
		return f
	}
	if deleted {
		errs = append([]string{"deleted while mapped"}, errs...)
	}
	f.Err = errors.New(strings.Join(errs, "; "))
	return f
}

// openMapped finds, in a recording read on its machine after it was made
// (not Options.Live, nor under Options.SymFS), a file that openFile found
// nowhere usable, in the recorded process at.pid if that still maps it
// now, as openLive does (/proc/PID/map_files, /proc/PID/root): a file
// that is at its path only in the process's mount namespace (a
// container's), or deleted, or replaced at its path, while the process
// runs. perf reads such a file in the process's namespace too. It
// returns nil when not found. The process id may name another process by
// now, and the path in it another file: a file is taken only when it is
// the one recorded, by the device and inode of its MMAP2 record (fid),
// as the process's mapping of the recorded range now gives them, or by
// the build ID its MMAP record carries (id). A build ID of the
// recording's table (not passed as id) does not tell: perf record read
// it at the path on this machine, which may hold another file.
func (s *Session) openMapped(name, lookup string, deleted bool, id []byte, fid fileID, at *liveMapping) *File {
	if s.opts.Live || s.opts.SymFS != "" || !s.opts.SameMachine || at == nil || name == "[vdso]" {
		return nil
	}
	if fid.ino == 0 && len(id) == 0 {
		return nil // nothing would tell the recorded file from another
	}
	if fid.ino != 0 && !s.mapsNow(at, fid) {
		return nil
	}
	f := s.openLive(name, lookup, deleted, fid, id, at, true)
	if f.Path == "" {
		return nil
	}
	return f
}

// mapsNow reports whether process at.pid maps exactly at's range of the
// file fid now, by its /proc/PID/maps: the device and inode there are
// the superblock's, as in MMAP2 records (stat's device differs on
// btrfs), and a process that reused the id maps other files.
func (s *Session) mapsNow(at *liveMapping, fid fileID) bool {
	maps, ok := s.liveMaps[at.pid]
	if !ok {
		maps, _ = procmaps.Read(int(at.pid))
		if s.liveMaps == nil {
			s.liveMaps = map[uint32][]arch.Mapping{}
		}
		s.liveMaps[at.pid] = maps
	}
	for _, m := range maps {
		if m.Start == at.start && m.End == at.end && m.Inode == fid.ino {
			major, minor, ok := procmaps.DevNumbers(m.Dev)
			return ok && major == fid.major && minor == fid.minor
		}
	}
	return false
}

// notRecorded says why the file at a recorded path, st, without a build
// ID, is not the file the recording mapped with inode ino (0: not
// recorded), or returns nil when nothing says so. On the recording's
// machine, another inode is another file (a new build is written to a
// new file and renamed, or the old one unlinked first), and a file
// modified after the recording ended was rewritten in place. perf tells
// such files apart by the same inode numbers. The device is not
// compared: btrfs reports a subvolume's in stat, its superblock's in
// MMAP2 records.
func (s *Session) notRecorded(st os.FileInfo, ino uint64) error {
	if !s.opts.SameMachine {
		return nil
	}
	if got := sysfile.Inode(st); got != 0 && ino != 0 && got != ino {
		return fmt.Errorf("replaced since the recording (inode %d, recorded %d), and no build ID tells the builds apart", got, ino)
	}
	if end := s.opts.RecordingEnd; !end.IsZero() && st.ModTime().After(end) {
		return fmt.Errorf("modified at %s, after the recording ended (%s), and no build ID tells the builds apart",
			st.ModTime().Format("2006-01-02 15:04:05"), end.Format("2006-01-02 15:04:05"))
	}
	return nil
}

// replacedDuring says why the file at a recorded path, st, whose build
// ID is the one the recording's table gives, is not the file the
// recording mapped with inode ino: it is another inode, which came to the
// path (its inode change time) before the recording ended, so that perf
// record read the table's build ID from it, not from the mapped file (a
// build replaced while the program ran, or another file at the path in
// the program's mount namespace). nil when nothing says so: a file
// that came after the recording ended, if of the recorded build, is the
// same build installed again.
func (s *Session) replacedDuring(st os.FileInfo, ino uint64) error {
	end := s.opts.RecordingEnd
	if !s.opts.SameMachine || ino == 0 || end.IsZero() {
		return nil
	}
	got := sysfile.Inode(st)
	if got == 0 || got == ino {
		return nil
	}
	if ct := sysfile.ChangeTime(st); ct.IsZero() || ct.After(end) {
		return nil
	}
	return fmt.Errorf("not the file mapped (inode %d, mapped %d), and there before the recording ended: the recorded build ID is this file's", got, ino)
}

// trimBuildID drops the zero padding perf adds to build IDs shorter than
// 20 bytes.
func trimBuildID(id []byte) []byte {
	if len(id) == 20 {
		if i := bytes.LastIndexFunc(id, func(r rune) bool { return r != 0 }); i >= 0 && i < 15 {
			// A 16-byte (MD5) or shorter ID, padded.
			return id[:max(i+1, 16)]
		}
	}
	return id
}

// sameBuildID compares a recorded build ID (possibly zero-padded to 20
// bytes) with a file's.
func sameBuildID(recorded, own []byte) bool {
	if bytes.Equal(recorded, own) {
		return true
	}
	if len(recorded) > len(own) && bytes.Equal(recorded[:len(own)], own) {
		for _, b := range recorded[len(own):] {
			if b != 0 {
				return false
			}
		}
		return true
	}
	return false
}

// readELFInfo reads the PT_LOAD segments and the build ID of the ELF file
// r of the given size, without reading its sections' contents.
func readELFInfo(r io.ReaderAt, size int64) ([]loadSeg, []byte, error) {
	ef, err := elffile.NewFileAt(r, size)
	if err != nil {
		var fe *elf.FormatError
		if errors.As(err, &fe) {
			return nil, nil, fmt.Errorf("not an ELF file (%v)", err)
		}
		return nil, nil, err
	}
	var segs []loadSeg
	for _, p := range ef.Progs {
		if p.Type == elf.PT_LOAD {
			segs = append(segs, loadSeg{off: p.Off, vaddr: p.Vaddr, filesz: p.Filesz, exec: p.Flags&elf.PF_X != 0})
		}
	}
	return segs, elffile.BuildID(ef.File), nil
}

// vdsoFile finds the vDSO image for f: perf's cached copy of the recorded
// build ID, else this process's own vDSO when its build ID is the
// recorded one (or none is recorded and the recording is from this
// kernel): the vDSO is part of the kernel.
func (s *Session) vdsoFile(f *File) bool {
	img, own := ownVDSO()
	if img == nil {
		return false
	}
	if len(f.BuildID) > 0 {
		if len(own) == 0 || !sameBuildID(f.BuildID, own) {
			return false
		}
	} else if !s.sameKernel {
		return false
	}
	segs, id, err := readELFInfo(bytesReaderAt(img), int64(len(img)))
	if err != nil {
		return false
	}
	f.Path, f.segs, f.r, f.image = "[vdso]", segs, bytesReaderAt(img), img
	f.key = "[vdso] " + hex.EncodeToString(id)
	if len(f.BuildID) == 0 {
		f.BuildID = id
	}
	return true
}

// bytesReaderAt reads a byte slice.
type bytesReaderAt []byte

func (b bytesReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off > int64(len(b)) {
		return 0, io.EOF
	}
	n := copy(p, b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// isAnon reports whether a mapping of this name has no file behind it:
// perf shows addresses in it as they are, not as file offsets.
func isAnon(name string) bool {
	switch {
	case name == "", name == "//anon", name == "[heap]", name == "[stack]", name == "[vsyscall]",
		strings.HasPrefix(name, "[anon:"), strings.HasPrefix(name, "[stack:"),
		strings.HasPrefix(name, "/dev/zero"), strings.HasPrefix(name, "/anon_hugepage"),
		strings.HasPrefix(name, "/SYSV"):
		return true
	}
	return strings.HasPrefix(name, "/tmp/perf-") && strings.HasSuffix(name, ".map")
}
