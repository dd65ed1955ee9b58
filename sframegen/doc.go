// Package sframegen makes SFrame sections. It has three jobs, one per
// subcommand of the sframe tool:
//
//   - Generating SFrame from CFI (sframe gen): FromCFI reads the DWARF
//     call frame information of an ELF file (.eh_frame or .debug_frame)
//     and returns a Result, the SFrame functions ready to encode (version
//     3 by default, version 2 on request) for AMD64, AArch64 and s390x,
//     what SFrame cannot say left out with a Reason, and coverage Stats.
//     Result.Encode lays the section out for a load address; to make it
//     loadable in an executable, give the bytes to
//     elffile.AddSFrameSegment at the address elffile.PlanSFrameSegment
//     chooses. FromCFITable does the same from a cfi.Table.
//   - Converting between versions (sframe convert): ToVersion rewrites the
//     SFrame section of an ELF image (object, executable or shared
//     library) in version 2 or 3, relocations included; ToVersionRaw does
//     it for a bare section. What the target version cannot express is an
//     UnrepresentableError, or with DropUnrepresentable a DroppedFunc.
//   - Verifying SFrame against CFI (sframe verify): VerifyELF checks an ELF
//     file's SFrame section against its own CFI, Verify a section against
//     a cfi.Table; both return a Report of the PCs where the two disagree.
//
// The package reads ELF through debug/elf and elffile, which knows ELF
// only: sections, segments, relocations. It writes nothing to disk and
// never modifies its input.
//
// # Generating SFrame from CFI
//
// FromCFI is built on two packages: cfi walks the FDEs of
// .eh_frame (or .debug_frame) and streams each one's rows (the CIE's
// initial rules, then the FDE program, with remember/restore state
// already resolved), and the sframe encoder lays out the section.
// Between them, FromCFITable maps every CFI row to an sframe.Row: the CFA
// rule, the return address (RA) rule and the frame pointer (FP) rule,
// the only three values SFrame records. Other registers are ignored, as
// gas ignores them. A new SFrame row (FRE) starts where the CFA, RA or FP
// recovery changes; rows that only change other registers are merged
// into the previous one. This gives the FRE boundaries gas writes for
// the same CFI, with one rule of gas's reproduced on purpose: gas always
// links in the row begun by the FDE's last DW_CFA_advance_loc, even when
// it equals the previous row (for example after a trailing
// ".cfi_restore %rbx"), so the converter keeps that row too.
//
// Per ABI:
//
//   - AMD64: the RA must be at CFA-8 (the header's fixed RA offset);
//     AArch64 and s390x track the RA per row (unspecified or same-value
//     means "still in the link register"). A saved FP with an RA still in
//     its register is written with a padding RA word, as gas does.
//   - The PLT's CFA expression that ld writes on x86-64
//     (rsp + 8 + ((rip & 15) >= 11) << 3) becomes a PC-mask function with
//     repeat size 16 and rows sp+8 at 0 and sp+16 at 11, starting where
//     the expression starts; the FDE's rows before it (PLT0) become a
//     separate PC-increment function, as ld writes them.
//   - Version 3, AMD64 and s390x: a CFA based on another register (DRAP:
//     r10), a dereferenced CFA (DW_OP_bregN off; DW_OP_deref), an RA or
//     FP held in a register (DW_CFA_register) or at a register-relative
//     address (DW_CFA_expression DW_OP_bregN off) make the function a
//     flexible FDE. The converter accepts any base register, where gas
//     2.47 accepts only rbp for the dereferenced CFA.
//   - s390x version 2: an RA or FP held in a register is encoded as an
//     odd data word (the v2 s390x register encoding).
//   - A CIE with augmentation "S" sets the signal bit (v3). When a signal
//     frame's rows cannot be expressed, v3 still writes the function, with
//     no rows, which tells unwinders that the frame is a signal frame.
//   - DW_CFA_undefined for the RA column gives an "RA undefined" row (no
//     data words): the outermost frame. Unwinding ends there, so its CFA
//     and FP rules do not matter and are not required to be expressible.
//
// What SFrame (or the chosen version) cannot express is left out per
// function, as gas does, with a Reason (a small enum) and the
// register, expression or PC in question. Result.Stats counts the
// functions and bytes of code covered and groups the rest by reason.
//
// # Deliberate differences from gas and ld
//
// The tests compare, function by function, the section generated from
// each corpus file's own CFI with the .sframe that gas and ld wrote. All
// functions gas described have identical attributes and rows, except:
//
//   - .plt.got (written by ld, not gas): ld 2.44-2.47 describe these
//     entries (a jmp through the GOT) as a PC-mask function with CFA
//     sp+16. Both the CFI ld writes for .plt.got and the code say sp+8,
//     which is what the converter writes (as a PC-increment function).
//     Verify reports ld's rows as a known deviation (KnownPLTGot).
//   - Version 2, PLT0: ld 2.44 wrote repeat size 16 in PLT0's PC-increment
//     function, where the field has no meaning; the converter writes 0, as
//     ld 2.47 does.
//   - Version 2, binutils 2.41-2.44 gas (objects only in the corpus): it
//     wrote no RA-undefined rows, and it silently ignored .cfi_register for
//     the AMD64 return address, writing rows that say the RA is at CFA-8.
//     The converter writes RA-undefined rows (v2 errata 2) and leaves a
//     function whose RA lives in a register out of a v2 section.
//   - Function order: the FREs are laid out in CFI order, which for linked
//     files differs from ld's (it puts the PLT last); the function index is
//     sorted either way. Offsets and sizes of the data words are the
//     smallest that fit, chosen as gas chooses them, so sections are the
//     same size for the same functions (within a few bytes).
//
// Relocatable objects convert too (their function starts are section
// offsets), which lets the tests use the hand-written edge cases of the
// corpus; the result is an unsorted index in CFI order, as gas writes in
// objects, and cannot be linked (it carries no relocations).
//
// # Converting between versions
//
// ToVersion decodes the section into the same sframe.Row values
// (sframe.Extract) and encodes them again for the target version, with
// PC-relative function starts as binutils 2.45 and later write them.
// Converting to the version a section already has keeps its encoding: the
// file comes out unchanged. In a relocatable object the .rela section of
// .sframe is rewritten with it, as gas would have written it; in a linked
// file a section that grows no longer fits in its place and goes to a new
// loadable segment (ToVersionResult.Segment). Version 1 can be read but
// not written. A function keeps its FDE type where the target version
// can write it; an s390x flexible FDE (v3) that saves the FP or RA in a
// register becomes a default FDE in v2, whose s390x data words encode
// register saves (an odd word), and back in v3 a flexible FDE again, so
// that v3 -> v2 -> v3 gives the rows gas wrote.
//
// # Verification
//
// Verify walks every CFI function and, at every CFI row boundary and
// every SFrame row boundary inside it (each repetition of a PC-mask
// function's rows included), compares how the two recover the CFA, the
// RA and the FP, in a canonical form: "register + offset" or "value at
// register + offset" (CFA-relative when the base is the CFA), "undefined",
// or an expression SFrame cannot match. Same-value and unspecified rules
// mean "still in the register", which is what an SFrame FP entry that is
// absent (or an RA entry on AArch64 and s390x) means; with a fixed RA
// offset in the header an absent RA means the fixed slot. Where both sides
// say the RA is undefined the trace ends and nothing else is compared.
// The PLT expression is evaluated at each PC. CFI functions with no
// SFrame rows are listed as left out, not failed; but a check that
// compared no function at all fails, and an SFrame section that does
// not validate is an error, not a report. In relocatable objects
// functions are named by the STT_FUNC symbol of the section the FDE's
// relocation points into, at the FDE's section offset.
package sframegen
