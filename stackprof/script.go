package stackprof

import (
	"bufio"
	"io"
	"math/bits"
	"strconv"

	"github.com/sframekit/sframekit/internal/textfmt"
	"github.com/sframekit/sframekit/perfunwind"
)

// ScriptWriter writes unwound samples as `perf script -F
// comm,tid,time,ip,sym,dso --no-inline` prints them, so that the two can
// be compared with diff: per sample a line "COMM TID TIME: " ("COMM TID "
// for a sample without time, as perf script -F comm,tid,ip,sym,dso
// prints it), one line per frame, innermost first, "\tADDR SYM (DSO)", and an empty line. ADDR is
// what perf shows: the file offset of user addresses (the return address
// minus one for callers), kernel addresses as they are; SYM is the symbol
// (C++ and Rust names demangled without parameters, as perf shows them),
// "[unknown]" when none is known; DSO is the recorded file name,
// "[kernel.kallsyms]", or "[unknown]". When the Resolver expands inlined
// calls, a frame of a symbol that DWARF places in a function has the
// lines perf script shows without --no-inline (perfunwind.Loc.Func and
// Resolver.PerfName): the calls inlined there, innermost first, then the
// function as DWARF names it, each "\tADDR NAME (inlined)" but for a name
// that is the symbol's, "\tADDR SYM (DSO)"; other frames have their
// inlined calls, if any, before their own line.
type ScriptWriter struct {
	w     *bufio.Writer
	r     *perfunwind.Resolver
	buf   []byte
	comm  []byte             // a sample's COMM, quoted (writeIPOnly)
	lines frameCache[string] // each frame's lines
}

// NewScriptWriter returns a ScriptWriter writing to w, naming frames with r.
func NewScriptWriter(w io.Writer, r *perfunwind.Resolver) *ScriptWriter {
	return &ScriptWriter{w: bufio.NewWriterSize(w, 256<<10), r: r}
}

// Write writes one sample. A sample without a call graph
// (perfunwind.Stack.IPOnly) is one line, as perf script prints those:
// "COMM TID TIME:  ADDR SYM (DSO)", COMM right-aligned in 16 columns and
// ADDR the sampled address itself.
func (sw *ScriptWriter) Write(st *perfunwind.Stack) error {
	if st.IPOnly && len(st.Frames) == 1 {
		return sw.writeIPOnly(st)
	}
	b := sw.buf[:0]
	b = textfmt.AppendPrintable(b, st.Comm)
	b = append(b, ' ')
	b = appendPadTid(b, st.Tid)
	b = append(b, ' ')
	b = appendTime(b, st)
	b = append(b, '\n')
	for i := range st.Frames {
		f := &st.Frames[i]
		b = appendCached(&sw.lines, b, f.Map, f.PerfPC(), sw.appendFrame)
	}
	b = append(b, '\n')
	sw.buf = b
	_, err := sw.w.Write(b)
	return err
}

// writeIPOnly writes the one line of a sample without a call graph.
func (sw *ScriptWriter) writeIPOnly(st *perfunwind.Stack) error {
	// COMM quoted as Write quotes it, then right-aligned.
	sw.comm = textfmt.AppendPrintable(sw.comm[:0], st.Comm)
	b := appendPad(sw.buf[:0], sw.comm, 16)
	b = append(b, ' ')
	b = appendPadTid(b, st.Tid)
	b = append(b, ' ')
	b = appendTime(b, st)
	f := &st.Frames[0]
	loc := sw.r.Resolve(f.Map, f.PC)
	b = append(b, ' ')
	b = appendHex16(b, f.PC)
	b = append(b, ' ')
	if loc.Short != "" {
		b = textfmt.AppendPrintable(b, loc.Short)
	} else {
		b = append(b, "[unknown]"...)
	}
	b = appendDSO(b, f.Map)
	sw.buf = b
	_, err := sw.w.Write(b)
	return err
}

// appendFrame appends the lines of the frame at pc (as perf shows it) of
// mapping m: the calls inlined there, if any, then the frame's own.
func (sw *ScriptWriter) appendFrame(b []byte, m *perfunwind.Mapping, pc uint64) []byte {
	loc := sw.r.Resolve(m, pc)
	addr := m.PerfAddr(pc)
	if loc.Func.Name != "" && loc.Short != "" {
		// The calls inlined there, then the function.
		for k := 0; k <= len(loc.Inlined); k++ {
			in := loc.Func
			if k < len(loc.Inlined) {
				in = loc.Inlined[k]
			}
			n := sw.r.PerfName(in)
			b = appendAddr(b, addr)
			b = textfmt.AppendPrintable(b, n)
			if n != loc.Short {
				b = append(b, " (inlined)\n"...)
			} else {
				b = appendDSO(b, m)
			}
		}
		return b
	}
	for k := range loc.Inlined {
		b = appendAddr(b, addr)
		if n := loc.Inlined[k].Name; n != "" {
			b = textfmt.AppendPrintable(b, n)
		} else {
			b = append(b, "[unknown]"...)
		}
		b = append(b, " (inlined)\n"...)
	}
	b = appendAddr(b, addr)
	if loc.Short != "" {
		b = textfmt.AppendPrintable(b, loc.Short)
	} else {
		b = append(b, "[unknown]"...)
	}
	return appendDSO(b, m)
}

// appendDSO appends " (DSO)" and a newline: m's file name, or
// "[unknown]" for no mapping.
func appendDSO(b []byte, m *perfunwind.Mapping) []byte {
	b = append(b, " ("...)
	if m != nil {
		b = textfmt.AppendPrintable(b, m.Name)
	} else {
		b = append(b, "[unknown]"...)
	}
	return append(b, ")\n"...)
}

// Flush writes out what is buffered.
func (sw *ScriptWriter) Flush() error { return sw.w.Flush() }

// appendAddr appends "\t", addr in hexadecimal right-aligned in 16
// columns, and a space.
func appendAddr(b []byte, addr uint64) []byte {
	b = append(b, '\t')
	return append(appendHex16(b, addr), ' ')
}

// appendHex16 appends addr in hexadecimal right-aligned in 16 columns.
func appendHex16(b []byte, addr uint64) []byte {
	digits := max((bits.Len64(addr)+3)/4, 1)
	b = append(b, spaces[:max(16-digits, 0)]...)
	return strconv.AppendUint(b, addr, 16)
}

const spaces = "                "

// appendPadTid appends thread id tid as perf script prints it: signed (a
// pid_t; the kernel's -1 for a task already unhashed from its pid
// namespace as it exits), right-aligned in 5 columns.
func appendPadTid(b []byte, tid uint32) []byte {
	var tmp [11]byte
	return appendPad(b, strconv.AppendInt(tmp[:0], int64(int32(tid)), 10), 5)
}

// appendPad appends s right-aligned in width columns.
func appendPad(b, s []byte, width int) []byte {
	for n := len(s); n < width; n++ {
		b = append(b, ' ')
	}
	return append(b, s...)
}

// appendTime appends st's time as perf script prints it, "TIME: ",
// TIME right-aligned in 12 columns: seconds, a dot and six digits of
// microseconds; nothing for a sample without time (Stack.NoTime), as
// perf script -F without time prints such samples.
func appendTime(b []byte, st *perfunwind.Stack) []byte {
	if st.NoTime {
		return b
	}
	t := st.Time
	var tmp [32]byte
	d := strconv.AppendUint(tmp[:0], t/1e9, 10)
	d = append(d, '.')
	us := (t % 1e9) / 1e3
	d = append(d, byte('0'+us/100000), byte('0'+us/10000%10), byte('0'+us/1000%10),
		byte('0'+us/100%10), byte('0'+us/10%10), byte('0'+us%10))
	return append(appendPad(b, d, 12), ": "...)
}
