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
	jitCodeUnwinding    = 4
	jitLoadFixed        = 40 // pid, tid, vma, code_addr, code_size, code_index
	jitMoveFixed        = 48 // pid, tid, vma, old_code_addr, new_code_addr, code_size, code_index
	jitUnwindingFixed   = 24 // unwinding_size, eh_frame_hdr_size, mapped_size
	maxJitdumpName      = 64 << 10
	// maxUnwinding bounds the unwinding data of one record: a function's
	// .eh_frame takes tens of bytes.
	maxUnwinding = 1 << 20
)

// UnwindTextAddr is where perf inject places a function's code in the
// ELF file it writes for it (genelf's GEN_ELF_TEXT_OFFSET): the
// pc-relative addresses of the function's unwinding data assume that
// layout, the .eh_frame following the code (see Unwinding.EHFrameAddr).
const UnwindTextAddr = 0x80

// Unwinding is the CFI that a JIT_CODE_UNWINDING_INFO record gives the
// code of the next JIT_CODE_LOAD record (V8's --perf-prof-unwinding-info,
// Python 3.13's -X perf_jit): .eh_frame and .eh_frame_hdr bytes, in the
// file's byte order, laid out as perf inject lays them out: the code at
// UnwindTextAddr, .eh_frame at the next 8-byte boundary after it,
// .eh_frame_hdr right after .eh_frame. An Unwinding is immutable and may
// be shared by many functions (a JIT's trampolines all have the same).
type Unwinding struct {
	EHFrame, EHFrameHdr []byte
	Order               binary.ByteOrder
}

// EHFrameAddr returns the address of the .eh_frame of a function of
// codeSize bytes, as perf inject places it (genelf's ALIGN_8 of the
// code's end); its .eh_frame_hdr follows at EHFrameAddr + len(EHFrame).
func (u *Unwinding) EHFrameAddr(codeSize uint64) uint64 {
	return (UnwindTextAddr + codeSize + 7) &^ 7
}

// ParseJitdump reads a jitdump file: the functions its JIT_CODE_LOAD
// records place (at code_addr, code_size bytes, named by the record's
// string; at most 64 KiB of a name are kept), and where
// JIT_CODE_MOVE records move them. Other records are skipped. A file cut
// inside a record (the JIT was still writing) gives the records before
// it, with Truncated set; a header that is not jitdump's is an error.
// At most MaxEntries functions are kept. A JIT_CODE_UNWINDING_INFO
// record gives the next load its Unwinding (LookupUnwinding), as perf
// inject gives it to the ELF file it writes for that code; equal
// unwinding data is kept once.
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
	unwinds := map[string]int32{}
	pending := int32(-1) // the unwinding data for the next load
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
			if pending >= 0 || t.symUnwind != nil {
				t.setUnwind(pending)
			}
			pending = -1
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
		case jitCodeUnwinding:
			pending = -1
			u, hdr, ok := unwinding(body, bo)
			if !ok {
				t.Skipped++
			}
			if u == nil {
				continue
			}
			key := string(u)
			i, ok := unwinds[key]
			if !ok {
				i = int32(len(t.unwinds))
				unwinds[key] = i
				b := []byte(key)
				t.unwinds = append(t.unwinds, &Unwinding{EHFrame: b[:len(b)-int(hdr)], EHFrameHdr: b[len(b)-int(hdr):], Order: bo})
			}
			pending = i
		}
	}
	return finish(t), nil
}

// unwinding returns the unwinding data of a JIT_CODE_UNWINDING_INFO
// record's body: .eh_frame then .eh_frame_hdr, unwinding_size bytes of
// which the last eh_frame_hdr_size are the header (perf's genelf reads
// them so), and that size; ok is false when the sizes do not fit the
// body. Without a header or without an .eh_frame (V8 writes a bare
// header when it has no unwinding info) there is no CFI: data is nil.
func unwinding(body []byte, bo binary.ByteOrder) (data []byte, hdr uint64, ok bool) {
	if len(body) < jitUnwindingFixed {
		return nil, 0, false
	}
	size, hdr := bo.Uint64(body), bo.Uint64(body[8:])
	rest := body[jitUnwindingFixed:]
	if size > uint64(len(rest)) || size > maxUnwinding || hdr > size {
		return nil, 0, false
	}
	if hdr == 0 || hdr == size {
		return nil, 0, true
	}
	return rest[:size], hdr, true
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
