// Package dump prints SFrame sections for people and programs: the text
// of `objdump --sframe`, byte for byte (the dialect of binutils 2.40 for
// version 1 sections, which newer objdump refuses, and of 2.47 for
// versions 2 and 3), and a stable JSON form of the same content.
//
// An Input is a section ready to print, loaded from an ELF file (LoadELF,
// FromELF: relocations of relocatable objects applied as objdump applies
// them) or from a bare section (FromRaw). Text prints it as objdump does,
// after FileHeader's line; JSON writes it as one JSON object, and Build
// returns that object for callers that want the values:
//
//	in, err := dump.LoadELF("a.out", "") // ".sframe", or the SHT_GNU_SFRAME section
//	...
//	dump.WriteFileHeader(os.Stdout, in.Path, in.Format)
//	err = dump.WriteSFrameText(os.Stdout, in.SFrame, in.Section)
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
