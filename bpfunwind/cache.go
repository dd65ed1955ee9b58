package bpfunwind

import (
	"cmp"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/sframekit/sframekit/internal/outfile"
	"github.com/sframekit/sframekit/internal/sysfile"
)

// A file's walker table costs tens of milliseconds to make where its
// SFrame is compiled from its CFI (the C library: about 45 ms, more on a
// loaded machine), at every start of sframe record --bpf, for the same
// few libraries; and a program's first samples are passed on to the
// user-space walk until its tables are loaded. So tables are kept on
// disk, keyed by the file's build ID, machine and size, in the user's
// cache directory (Options.TableCache): read back, they cost a read and
// a check. The size keeps apart a file that claims another's build ID
// (rebuilt without a new one, or crafted) unless it has the same size
// too; such a file's tables then serve the other, whose stacks may come
// out wrong, but the walker stays within its bounds (DecodeTable).
// Tables made by an older BuildTable are told apart by cacheMagic's
// version.
//
// A cached table is untrusted input (the directory is writable, files
// get cut short or corrupted): DecodeTable checks everything the walker
// relies on, and a table that fails is made again and rewritten.

// cacheMagic starts a cached table; its last byte is the version of the
// format and of BuildTable's output (bump it when either changes).
var cacheMagic = [8]byte{'S', 'F', 'K', 'B', 'P', 'F', 'T', 3}

// cacheHeader is the size of a cached table's header: magic (8), ELF
// machine (4), rows (4), Base (8), Limit (8), SFrameRows (4), Skipped
// (4 each).
const cacheHeader = 36 + 4*int(NumReasons)

// Bounds of the cache directory: beyond them the least recently written
// tables are removed, after each write.
const (
	maxCacheFiles = 128
	maxCacheBytes = 64 << 20
)

// EncodeTable returns tab in the cache's format, for ELF machine mach:
// the header, 16 bytes a row, and a CRC-32 (IEEE) of all before it.
func EncodeTable(tab *Table, mach uint32) []byte {
	le := binary.LittleEndian
	b := make([]byte, 0, cacheHeader+rowSize*len(tab.Rows)+4)
	b = append(b, cacheMagic[:]...)
	b = le.AppendUint32(b, mach)
	b = le.AppendUint32(b, uint32(len(tab.Rows)))
	b = le.AppendUint64(b, tab.Base)
	b = le.AppendUint64(b, tab.Limit)
	b = le.AppendUint32(b, uint32(tab.SFrameRows))
	for _, n := range tab.Skipped {
		b = le.AppendUint32(b, uint32(n))
	}
	b = appendRows(b, tab.Rows)
	return le.AppendUint32(b, crc32.ChecksumIEEE(b))
}

// appendRows appends rows as the walker's maps hold them (struct row).
func appendRows(b []byte, rows []Row) []byte {
	le := binary.LittleEndian
	for i := range rows {
		r := &rows[i]
		b = le.AppendUint32(b, r.PC)
		b = le.AppendUint32(b, uint32(r.CFAOff))
		b = le.AppendUint16(b, uint16(r.RAOff))
		b = le.AppendUint16(b, uint16(r.FPOff))
		b = append(b, r.Flags, 0, 0, 0)
	}
	return b
}

// errCache says a cached table is not one EncodeTable wrote.
var errCache = errors.New("not a valid cached table")

// DecodeTable reads a table EncodeTable wrote for ELF machine mach, of at
// most maxRows rows. It checks the size, the checksum and what the
// walker relies on: rows in strictly increasing order from PC 0, within
// the table's span (under 4 GiB), with known flags. It allocates the
// rows only (16 bytes each, at most maxRows).
func DecodeTable(b []byte, mach uint32, maxRows int) (*Table, error) {
	le := binary.LittleEndian
	if len(b) < cacheHeader+4 || [8]byte(b[:8]) != cacheMagic || le.Uint32(b[8:]) != mach {
		return nil, errCache
	}
	n := int(le.Uint32(b[12:]))
	if n > maxRows || len(b) != cacheHeader+rowSize*n+4 {
		return nil, errCache
	}
	body := b[:len(b)-4]
	if crc32.ChecksumIEEE(body) != le.Uint32(b[len(body):]) {
		return nil, errCache
	}
	tab := &Table{Base: le.Uint64(b[16:]), Limit: le.Uint64(b[24:]), SFrameRows: int(le.Uint32(b[32:]))}
	for i := range tab.Skipped {
		tab.Skipped[i] = int(le.Uint32(b[36+4*i:]))
	}
	if tab.Limit < tab.Base || tab.Limit-tab.Base >= math.MaxUint32 || n > 0 && tab.Limit == tab.Base {
		return nil, errCache
	}
	span := uint32(tab.Limit - tab.Base)
	const known = rowCFAFP | rowRA | rowFP | rowEnd | rowNone
	tab.Rows = make([]Row, n)
	for i := range tab.Rows {
		p := body[cacheHeader+rowSize*i:]
		r := Row{PC: le.Uint32(p), CFAOff: int32(le.Uint32(p[4:])), RAOff: int16(le.Uint16(p[8:])), FPOff: int16(le.Uint16(p[10:])), Flags: p[12]}
		if r.Flags&^known != 0 || p[13]|p[14]|p[15] != 0 || r.PC >= span || i == 0 && r.PC != 0 || i > 0 && r.PC <= tab.Rows[i-1].PC {
			return nil, errCache
		}
		tab.Rows[i] = r
	}
	return tab, nil
}

// cachePath returns the file of the table of the build buildID, of size
// bytes, for ELF machine mach in dir; "" when it has none (no build ID,
// or not one that names a file).
func cachePath(dir string, buildID []byte, mach uint32, size int64) string {
	if dir == "" || len(buildID) == 0 || len(buildID) > 64 {
		return ""
	}
	return filepath.Join(dir, fmt.Sprintf("%s-%d-%d.tab", hex.EncodeToString(buildID), mach, size))
}

// readCached returns the cached table at path, nil when there is none
// valid: a file of at most the size of maxRows rows, regular (a FIFO or
// device put there is not opened, see sysfile.OpenRegular).
func readCached(path string, mach uint32, maxRows int) *Table {
	f, err := sysfile.OpenRegular(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	limit := int64(cacheHeader + rowSize*maxRows + 4)
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil || int64(len(b)) > limit {
		return nil
	}
	tab, err := DecodeTable(b, mach, maxRows)
	if err != nil {
		return nil
	}
	return tab
}

// writeCached writes tab at path (atomically: a reader sees the old file
// or the new one) and trims the directory to its bounds. Failures only
// cost the next run the table's making again.
func writeCached(path string, tab *Table, mach uint32) {
	dir := filepath.Dir(path)
	if os.MkdirAll(dir, 0o755) != nil || outfile.Write(path, EncodeTable(tab, mach), 0o644, nil) != nil {
		return
	}
	trimCache(dir)
}

// trimCache removes the least recently written tables of dir beyond
// maxCacheFiles or maxCacheBytes.
func trimCache(dir string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	type entry struct {
		name string
		size int64
		mod  int64
	}
	var es []entry
	var total int64
	for _, e := range ents {
		if !e.Type().IsRegular() || filepath.Ext(e.Name()) != ".tab" {
			continue
		}
		if fi, err := e.Info(); err == nil {
			es = append(es, entry{e.Name(), fi.Size(), fi.ModTime().UnixNano()})
			total += fi.Size()
		}
	}
	slices.SortFunc(es, func(a, b entry) int { return cmp.Compare(a.mod, b.mod) })
	for len(es) > maxCacheFiles || total > maxCacheBytes && len(es) > 1 {
		os.Remove(filepath.Join(dir, es[0].name))
		total -= es[0].size
		es = es[1:]
	}
}
