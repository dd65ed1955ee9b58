package jitmap

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// The jitdump format (perf's Documentation/jitdump-specification.txt):
// a file header, then records each starting with a 16-byte header (type,
// total size, timestamp), in the writer's byte order, which the magic
// tells.
const (
	jitdumpMagic        = 0x4A695444 // "JiTD" as the writer's uint32
	jitdumpMagicSwapped = 0x4454694A // the same, written in the other byte order
	jitHeaderSize       = 40         // magic, version, total_size, elf_mach, pad1, pid, timestamp, flags
	jitRecordSize       = 16         // id, total_size, timestamp
	jitCodeLoad         = 0
	jitCodeMove         = 1
	jitLoadFixed        = 40 // pid, tid, vma, code_addr, code_size, code_index
	jitMoveFixed        = 48 // pid, tid, vma, old_code_addr, new_code_addr, code_size, code_index
	maxJitdumpName      = 64 << 10
)

// ParseJitdump reads a jitdump file: the functions its JIT_CODE_LOAD
// records place (at code_addr, code_size bytes, named by the record's
// string; at most 64 KiB of a name are kept), and where
// JIT_CODE_MOVE records move them. Other records are skipped. A file cut
// inside a record (the JIT was still writing) gives the records before
// it, with Truncated set; a header that is not jitdump's is an error.
// At most MaxEntries functions are kept.
func ParseJitdump(data []byte) (*Table, error) {
	if len(data) < jitHeaderSize {
		return nil, fmt.Errorf("not a jitdump file: %d bytes", len(data))
	}
	var bo binary.ByteOrder
	switch binary.LittleEndian.Uint32(data) {
	case jitdumpMagic:
		bo = binary.LittleEndian
	case jitdumpMagicSwapped:
		bo = binary.BigEndian
	default:
		return nil, fmt.Errorf("not a jitdump file: magic %#x", binary.LittleEndian.Uint32(data))
	}
	hsize := uint64(bo.Uint32(data[8:]))
	if hsize < jitHeaderSize-8 || hsize > uint64(len(data)) {
		// Version 1 writers without the flags field wrote 32 bytes.
		return nil, fmt.Errorf("jitdump header of %d bytes in a file of %d", hsize, len(data))
	}
	t := &Table{}
	names := map[uint64]int32{} // code_index -> symbol, for moves
	for off := hsize; off < uint64(len(data)); {
		rest := data[off:]
		if len(rest) < jitRecordSize {
			t.Truncated = true
			break
		}
		id, size := bo.Uint32(rest), uint64(bo.Uint32(rest[4:]))
		if size < jitRecordSize {
			t.Truncated = true // no way to find the next record
			break
		}
		if size > uint64(len(rest)) {
			t.Truncated = true
			break
		}
		body := rest[jitRecordSize:size]
		off += size
		switch id {
		case jitCodeLoad:
			if len(body) < jitLoadFixed {
				t.Skipped++
				continue
			}
			addr, csize, index := bo.Uint64(body[16:]), bo.Uint64(body[24:]), bo.Uint64(body[32:])
			name := body[jitLoadFixed:]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			name = name[:min(len(name), maxJitdumpName)]
			if !t.add(Symbol{Name: string(name), Start: addr, Size: csize}) {
				return finish(t), nil
			}
			names[index] = int32(len(t.syms) - 1)
		case jitCodeMove:
			if len(body) < jitMoveFixed {
				t.Skipped++
				continue
			}
			addr, csize, index := bo.Uint64(body[24:]), bo.Uint64(body[32:]), bo.Uint64(body[40:])
			i, ok := names[index]
			if !ok {
				t.Skipped++
				continue
			}
			if !t.add(Symbol{Name: t.syms[i].Name, Start: addr, Size: csize}) {
				return finish(t), nil
			}
			names[index] = int32(len(t.syms) - 1)
		}
	}
	return finish(t), nil
}

func finish(t *Table) *Table {
	t.build()
	return t
}

// IsJitdump reports whether name, a mapped file's path, is a jitdump
// file as perf recognizes one: its base name "jit-PID.dump".
func IsJitdump(name string) bool {
	base := filepath.Base(name)
	pid, ok := strings.CutPrefix(base, "jit-")
	if !ok {
		return false
	}
	pid, ok = strings.CutSuffix(pid, ".dump")
	if !ok || pid == "" {
		return false
	}
	_, err := strconv.ParseUint(pid, 10, 32)
	return err == nil
}
