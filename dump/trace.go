package dump

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strconv"

	"github.com/sframekit/sframekit/internal/textfmt"
	"github.com/sframekit/sframekit/unwind"
)

// moduleName is the module's base name, as gdb prints "from libc.so.6".
func moduleName(m *unwind.Module) string {
	if m == nil {
		return ""
	}
	return filepath.Base(m.Name)
}

// WriteTraceText prints the trace t the way gdb's "thread apply all bt" does:
// per thread, a header line "Thread TID (name):" and one line per frame,
//
//	#N  0xADDR in func+0xoff [at FILE:LINE] (module) [method]
//
// where ADDR is the current PC of frame 0 and the return address of the
// callers, func is the demangled name when there is one (else the symbol
// name, "??" when unknown), the source position is there when
// unwind.Tracer.Symbolize found one (Tracer.Source), and method says
// which rules found the frame's caller (sframe, cfi, fp, signal; none for
// the last frame). Calls inlined at a frame's PC (Tracer.Inlines) come
// before it, numbered as frames as gdb numbers them, with the same ADDR, the inlined
// function's name without offset, and the method "inline".
// A signal trampoline prints as "<signal handler called>". A walk that
// ended before the outermost frame ends with a line "Backtrace stopped:
// REASON". Threads are separated by blank lines. Names from the target
// (thread, function, file and module names) are printed through
// textfmt.AppendPrintable: their control characters escaped.
//
// For a core that tells the signal the process died of, the first line
// is gdb's: "Program terminated with signal SIGSEGV, Segmentation
// fault."; for a fault the kernel signalled, "Fault address: 0xADDR."
// follows (si_addr); then a blank line.
func WriteTraceText(w io.Writer, t *unwind.Trace) error {
	// Appends rather than fmt: a deep trace has thousands of lines. The
	// buffer is flushed past 12 KB: sized for that at once, it is not
	// copied as it grows, and small, it costs few new pages (each is a
	// page fault, slow in virtual machines) for a few more writes.
	b := make([]byte, 0, 16<<10)
	if d := t.Termination; d != nil {
		name, desc := signalName(d.Signal)
		b = append(b, "Program terminated with signal "...)
		b = append(b, name...)
		b = append(b, ", "...)
		b = append(b, desc...)
		b = append(b, ".\n"...)
		if d.HasAddr() {
			b = append(b, "Fault address: 0x"...)
			b = strconv.AppendUint(b, d.Addr, 16)
			b = append(b, ".\n"...)
		}
		b = append(b, '\n')
	}
	for i := range t.Threads {
		th := &t.Threads[i]
		if i > 0 {
			b = append(b, '\n')
		}
		b = append(b, "Thread "...)
		b = strconv.AppendInt(b, int64(th.TID), 10)
		if th.Name != "" {
			b = append(b, " ("...)
			b = textfmt.AppendPrintable(b, th.Name)
			b = append(b, ')')
		}
		b = append(b, ":\n"...)
		n := 0 // frame number, inlined calls counted as gdb counts them
		for j := range th.Frames {
			f := &th.Frames[j]
			// Inlined calls first, innermost first, each at the
			// position in it: the PC's for the innermost, then the
			// call site of the one inside.
			file, line := f.File, f.Line
			for k := range f.Inlined {
				in := &f.Inlined[k]
				b = appendFrameStart(b, n, f.PC)
				n++
				if in.Name != "" {
					b = textfmt.AppendPrintable(b, in.Name)
				} else {
					b = append(b, "??"...)
				}
				b = appendSource(b, file, line)
				b = appendModule(b, f.Module)
				b = append(b, " [inline]\n"...)
				file, line = in.File, in.Line
			}
			b = appendFrameStart(b, n, f.PC)
			n++
			switch {
			case f.Signal:
				b = append(b, "<signal handler called>"...)
			case f.Func != "":
				if f.Demangled != "" {
					b = textfmt.AppendPrintable(b, f.Demangled)
				} else {
					b = textfmt.AppendPrintable(b, f.Func)
				}
				if f.Offset != 0 {
					b = append(b, "+0x"...)
					b = strconv.AppendUint(b, f.Offset, 16)
				}
			default:
				b = append(b, "??"...)
			}
			b = appendSource(b, file, line)
			b = appendModule(b, f.Module)
			b = append(b, " ["...)
			b = append(b, f.Method.String()...)
			b = append(b, "]\n"...)
		}
		if !th.Complete() {
			b = append(b, "Backtrace stopped: "...)
			b = append(b, th.Stop.String()...)
			if th.Err != nil {
				b = append(b, ": "...)
				b = textfmt.AppendPrintable(b, th.Err.Error())
			}
			b = append(b, '\n')
		}
		if len(b) > 12<<10 {
			if _, err := w.Write(b); err != nil {
				return err
			}
			b = b[:0]
		}
	}
	_, err := w.Write(b)
	return err
}

// signalNames are gdb's names and descriptions of Linux's signals
// (gdb/signals.def), by number: those of the process a core was dumped
// of, whatever the machine reading it.
var signalNames = [...][2]string{
	1: {"SIGHUP", "Hangup"}, 2: {"SIGINT", "Interrupt"}, 3: {"SIGQUIT", "Quit"},
	4: {"SIGILL", "Illegal instruction"}, 5: {"SIGTRAP", "Trace/breakpoint trap"},
	6: {"SIGABRT", "Aborted"}, 7: {"SIGBUS", "Bus error"}, 8: {"SIGFPE", "Arithmetic exception"},
	9: {"SIGKILL", "Killed"}, 10: {"SIGUSR1", "User defined signal 1"},
	11: {"SIGSEGV", "Segmentation fault"}, 12: {"SIGUSR2", "User defined signal 2"},
	13: {"SIGPIPE", "Broken pipe"}, 14: {"SIGALRM", "Alarm clock"}, 15: {"SIGTERM", "Terminated"},
	17: {"SIGCHLD", "Child status changed"}, 18: {"SIGCONT", "Continued"},
	19: {"SIGSTOP", "Stopped (signal)"}, 20: {"SIGTSTP", "Stopped (user)"},
	21: {"SIGTTIN", "Stopped (tty input)"}, 22: {"SIGTTOU", "Stopped (tty output)"},
	23: {"SIGURG", "Urgent I/O condition"}, 24: {"SIGXCPU", "CPU time limit exceeded"},
	25: {"SIGXFSZ", "File size limit exceeded"}, 26: {"SIGVTALRM", "Virtual timer expired"},
	27: {"SIGPROF", "Profiling timer expired"}, 28: {"SIGWINCH", "Window size changed"},
	29: {"SIGIO", "I/O possible"}, 30: {"SIGPWR", "Power fail/restart"}, 31: {"SIGSYS", "Bad system call"},
}

// signalName returns gdb's name and description of Linux signal n:
// real-time signals as "SIG34", "Real-time event 34", others it does
// not know as "?", "Unknown signal".
func signalName(n int) (name, desc string) {
	if n > 0 && n < len(signalNames) && signalNames[n][0] != "" {
		return signalNames[n][0], signalNames[n][1]
	}
	if n >= 32 && n <= 64 {
		return "SIG" + strconv.Itoa(n), "Real-time event " + strconv.Itoa(n)
	}
	return "?", "Unknown signal"
}

// appendFrameStart appends "#N  0xADDR in ".
func appendFrameStart(b []byte, n int, pc uint64) []byte {
	mark := len(b)
	b = append(b, '#')
	b = strconv.AppendInt(b, int64(n), 10)
	b = textfmt.PadTo(b, mark, 3)
	b = append(b, " 0x"...)
	b = textfmt.AppendHex(b, pc, 8)
	return append(b, " in "...)
}

// appendSource appends " at FILE:LINE" when the position is known.
func appendSource(b []byte, file string, line int) []byte {
	if file == "" {
		return b
	}
	b = append(b, " at "...)
	b = textfmt.AppendPrintable(b, file)
	b = append(b, ':')
	return strconv.AppendInt(b, int64(line), 10)
}

// appendModule appends " (module)" when the module is known.
func appendModule(b []byte, m *unwind.Module) []byte {
	if m == nil {
		return b
	}
	b = append(b, " ("...)
	b = textfmt.AppendPrintable(b, moduleName(m))
	return append(b, ')')
}

// The JSON form of an unwind.Trace (WriteTraceJSON). Addresses are strings of
// hexadecimal digits with a 0x prefix, since 64-bit values do not survive
// JSON numbers in every reader. Fields may be added; none will change
// meaning or be removed.
type (
	jsonTrace struct {
		PID         int              `json:"pid"`
		Termination *jsonTermination `json:"termination,omitempty"`
		Threads     []jsonThread     `json:"threads"`
	}
	jsonTermination struct {
		Signal      int    `json:"signal"`
		Name        string `json:"name"`
		Description string `json:"description"`
		TID         int    `json:"tid"`
		Code        int    `json:"code"`
		Address     string `json:"address,omitempty"`
	}
	jsonThread struct {
		TID      int         `json:"tid"`
		Name     string      `json:"name,omitempty"`
		Frames   []jsonFrame `json:"frames"`
		Complete bool        `json:"complete"`
		Stop     string      `json:"stop"`
		Error    string      `json:"error,omitempty"`
	}
	jsonInline struct {
		Function string `json:"function,omitempty"`
		File     string `json:"file,omitempty"`
		Line     int    `json:"line,omitempty"`
	}
	jsonFrame struct {
		Index     int          `json:"index"`
		PC        string       `json:"pc"`
		SP        string       `json:"sp,omitempty"`
		CFA       string       `json:"cfa,omitempty"`
		Function  string       `json:"function,omitempty"`
		Demangled string       `json:"demangled,omitempty"`
		Offset    uint64       `json:"offset"`
		File      string       `json:"file,omitempty"`
		Line      int          `json:"line,omitempty"`
		Inlined   []jsonInline `json:"inlined,omitempty"`
		Module    string       `json:"module,omitempty"`
		Method    string       `json:"method"`
		Signal    bool         `json:"signal,omitempty"`
	}
)

func hexString(v uint64) string { return fmt.Sprintf("0x%x", v) }

// WriteTraceJSON prints the trace t as one JSON object:
//
//	{"pid": 1234, "threads": [{"tid": 1234, "name": "prog",
//	  "frames": [{"index": 0, "pc": "0x7f...", "sp": "0x7ffc...",
//	    "cfa": "0x7ffc...", "function": "pause", "offset": 34,
//	    "module": "/usr/lib/x86_64-linux-gnu/libc.so.6",
//	    "method": "cfi", "signal": false}, ...],
//	  "complete": true, "stop": "end of stack"}]}
//
// A core that tells the signal the process died of adds, after pid,
//
//	"termination": {"signal": 11, "name": "SIGSEGV",
//	  "description": "Segmentation fault", "tid": 1234, "code": 1,
//	  "address": "0x0"}
//
// with the names gdb gives, si_code as code, and address (si_addr) only
// for a fault the kernel signalled (arch.Termination.HasAddr).
//
// pc, sp and cfa are hexadecimal strings ("cfa" is left out when not
// computed, "sp" when unknown: after an AArch64 frame-pointer step whose
// frame size no prologue told); function (the symbol name) is left out when unknown, and
// offset is then 0; demangled is its demangled form, for mangled names;
// file and line, the source position, when the Tracer looked them up;
// inlined, the calls inlined there, innermost first, each with the
// function and its call site (unwind.Tracer.Inlines);
// module is the path the target recorded; method is "sframe", "cfi",
// "fp", "signal" or "none" (see unwind.Method); signal marks a signal
// trampoline frame. complete is false when the walk stopped early, with
// the reason in stop (see unwind.Stop) and, when known, the cause in error.
func WriteTraceJSON(w io.Writer, t *unwind.Trace) error {
	jt := jsonTrace{PID: t.PID, Threads: make([]jsonThread, 0, len(t.Threads))}
	if d := t.Termination; d != nil {
		name, desc := signalName(d.Signal)
		jt.Termination = &jsonTermination{Signal: d.Signal, Name: name, Description: desc, TID: d.TID, Code: d.Code}
		if d.HasAddr() {
			jt.Termination.Address = hexString(d.Addr)
		}
	}
	for i := range t.Threads {
		th := &t.Threads[i]
		j := jsonThread{TID: th.TID, Name: th.Name, Complete: th.Complete(), Stop: th.Stop.String(), Frames: make([]jsonFrame, 0, len(th.Frames))}
		if th.Err != nil {
			j.Error = th.Err.Error()
		}
		for k := range th.Frames {
			f := &th.Frames[k]
			jf := jsonFrame{Index: k, PC: hexString(f.PC), Function: f.Func, Demangled: f.Demangled, Offset: f.Offset, File: f.File, Line: f.Line, Method: f.Method.String(), Signal: f.Signal}
			if f.SP != 0 {
				jf.SP = hexString(f.SP)
			}
			if f.CFA != 0 {
				jf.CFA = hexString(f.CFA)
			}
			for _, in := range f.Inlined {
				jf.Inlined = append(jf.Inlined, jsonInline{Function: in.Name, File: in.File, Line: in.Line})
			}
			if f.Module != nil {
				jf.Module = f.Module.Name
			}
			j.Frames = append(j.Frames, jf)
		}
		jt.Threads = append(jt.Threads, j)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // C++ names are full of < and >
	return enc.Encode(jt)
}
