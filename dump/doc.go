// Package dump holds the printers, for people and programs, each named
// WriteKINDText or WriteKINDJSON and taking the writer and one argument,
// the same for both forms of a kind (an *Input for SFrame, a *CFIInput
// for CFI, an *unwind.Trace for traces):
//
//   - SFrame sections: WriteSFrameText, the text of `objdump --sframe`,
//     byte for byte (the dialect of binutils 2.40 for version 1 sections,
//     which newer objdump refuses, and of 2.47 for versions 2 and 3), and
//     WriteSFrameJSON, a stable JSON form of the same content;
//   - DWARF CFI: WriteCFIText, the text of `readelf
//     --debug-dump=frames-interp` (-wF), byte for byte (binutils 2.47),
//     .eh_frame_hdr included, and WriteCFIJSON, the CIEs, FDEs and rows
//     of an ELF file's .eh_frame and .debug_frame; both streamed;
//   - stack traces (unwind.Trace): WriteTraceText, as gdb's "thread apply
//     all bt" prints them, and WriteTraceJSON.
//
// An Input is an SFrame section ready to print, loaded from an ELF file
// (LoadELF, FromELF: relocations of relocatable objects applied as
// objdump applies them) or from a bare section (FromRaw).
// WriteSFrameText prints it as objdump does, after WriteFileHeader's
// line; WriteSFrameJSON writes it as one JSON object, and SFrameJSON
// returns that object for callers that want the values:
//
//	in, err := dump.LoadELF("a.out", "") // ".sframe", or the SHT_GNU_SFRAME section
//	...
//	dump.WriteFileHeader(os.Stdout, in.Path, in.Format)
//	err = dump.WriteSFrameText(os.Stdout, in)
//
// The JSON form gives rules as values (kind, base, offset) rather than
// objdump's notation, and addresses as "0x..." strings so that readers
// holding numbers as doubles keep every bit; see JSONFile.
//
// Both forms read untrusted sections safely: a row that cannot be decoded
// ends the output with an error after what was printed, and so does a row
// past the header's FRE count, so a small crafted section cannot print
// gigabytes.
package dump
