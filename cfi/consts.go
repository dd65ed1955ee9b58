package cfi

import (
	"strconv"

	"github.com/sframekit/sframekit/internal/enumstr"
)

// Op is a call frame instruction opcode (DW_CFA_*). The three "primary"
// opcodes carry their operand in the low six bits of the byte; Op values
// for them are the high two bits only (OpAdvanceLoc, OpOffset, OpRestore).
type Op uint8

// Call frame instruction opcodes from DWARF 5 section 6.4.2, plus the GNU,
// MIPS and AArch64 extensions found in real binaries.
const (
	OpNop                        Op = 0x00
	OpSetLoc                     Op = 0x01
	OpAdvanceLoc1                Op = 0x02
	OpAdvanceLoc2                Op = 0x03
	OpAdvanceLoc4                Op = 0x04
	OpOffsetExtended             Op = 0x05
	OpRestoreExtended            Op = 0x06
	OpUndefined                  Op = 0x07
	OpSameValue                  Op = 0x08
	OpRegister                   Op = 0x09
	OpRememberState              Op = 0x0a
	OpRestoreState               Op = 0x0b
	OpDefCFA                     Op = 0x0c
	OpDefCFARegister             Op = 0x0d
	OpDefCFAOffset               Op = 0x0e
	OpDefCFAExpression           Op = 0x0f
	OpExpression                 Op = 0x10
	OpOffsetExtendedSF           Op = 0x11
	OpDefCFASF                   Op = 0x12
	OpDefCFAOffsetSF             Op = 0x13
	OpValOffset                  Op = 0x14
	OpValOffsetSF                Op = 0x15
	OpValExpression              Op = 0x16
	OpLoUser                     Op = 0x1c
	OpMIPSAdvanceLoc8            Op = 0x1d
	OpAArch64NegateRAStateWithPC Op = 0x2c
	OpGNUWindowSave              Op = 0x2d // DW_CFA_AARCH64_negate_ra_state on AArch64
	OpGNUArgsSize                Op = 0x2e
	OpGNUNegativeOffsetExtended  Op = 0x2f
	OpHiUser                     Op = 0x3f
	OpAdvanceLoc                 Op = 0x40
	OpOffset                     Op = 0x80
	OpRestore                    Op = 0xc0
)

// OpAArch64NegateRAState is the AArch64 name of OpGNUWindowSave: it
// toggles whether the return address is signed (pointer authentication).
const OpAArch64NegateRAState = OpGNUWindowSave

var opNames = map[Op]string{
	OpNop: "DW_CFA_nop", OpSetLoc: "DW_CFA_set_loc", OpAdvanceLoc1: "DW_CFA_advance_loc1",
	OpAdvanceLoc2: "DW_CFA_advance_loc2", OpAdvanceLoc4: "DW_CFA_advance_loc4",
	OpOffsetExtended: "DW_CFA_offset_extended", OpRestoreExtended: "DW_CFA_restore_extended",
	OpUndefined: "DW_CFA_undefined", OpSameValue: "DW_CFA_same_value", OpRegister: "DW_CFA_register",
	OpRememberState: "DW_CFA_remember_state", OpRestoreState: "DW_CFA_restore_state",
	OpDefCFA: "DW_CFA_def_cfa", OpDefCFARegister: "DW_CFA_def_cfa_register",
	OpDefCFAOffset: "DW_CFA_def_cfa_offset", OpDefCFAExpression: "DW_CFA_def_cfa_expression",
	OpExpression: "DW_CFA_expression", OpOffsetExtendedSF: "DW_CFA_offset_extended_sf",
	OpDefCFASF: "DW_CFA_def_cfa_sf", OpDefCFAOffsetSF: "DW_CFA_def_cfa_offset_sf",
	OpValOffset: "DW_CFA_val_offset", OpValOffsetSF: "DW_CFA_val_offset_sf",
	OpValExpression: "DW_CFA_val_expression", OpMIPSAdvanceLoc8: "DW_CFA_MIPS_advance_loc8",
	OpAArch64NegateRAStateWithPC: "DW_CFA_AARCH64_negate_ra_state_with_pc",
	OpGNUWindowSave:              "DW_CFA_GNU_window_save", OpGNUArgsSize: "DW_CFA_GNU_args_size",
	OpGNUNegativeOffsetExtended: "DW_CFA_GNU_negative_offset_extended",
	OpAdvanceLoc:                "DW_CFA_advance_loc", OpOffset: "DW_CFA_offset", OpRestore: "DW_CFA_restore",
}

// Known reports whether the package knows the opcode: how to decode its
// operands and what it does. The decoder returns an unknown opcode
// without operands, and the interpreter stops there.
func (o Op) Known() bool {
	if o&0xc0 != 0 {
		return true
	}
	_, ok := opNames[o]
	return ok
}

// String returns the DW_CFA_* name, so traces and errors read like the
// DWARF standard.
func (o Op) String() string {
	if o&0xc0 != 0 {
		o &= 0xc0
	}
	if s, ok := opNames[o]; ok {
		return s
	}
	return "DW_CFA_0x" + strconv.FormatUint(uint64(o), 16)
}

// PtrEnc is a DW_EH_PE_* pointer encoding byte as used in .eh_frame
// augmentation data and .eh_frame_hdr: a value format in the low nibble, an
// application (base) in bits 4-6 and the indirect flag in bit 7.
type PtrEnc uint8

// Pointer encodings (LSB Core specification, "DWARF Exception Header
// Encoding").
const (
	PEAbsPtr  PtrEnc = 0x00
	PEULEB128 PtrEnc = 0x01
	PEUData2  PtrEnc = 0x02
	PEUData4  PtrEnc = 0x03
	PEUData8  PtrEnc = 0x04
	PESigned  PtrEnc = 0x08
	PESLEB128 PtrEnc = 0x09
	PESData2  PtrEnc = 0x0a
	PESData4  PtrEnc = 0x0b
	PESData8  PtrEnc = 0x0c

	PEPCRel    PtrEnc = 0x10
	PETextRel  PtrEnc = 0x20
	PEDataRel  PtrEnc = 0x30
	PEFuncRel  PtrEnc = 0x40
	PEAligned  PtrEnc = 0x50
	PEIndirect PtrEnc = 0x80
	PEOmit     PtrEnc = 0xff
)

// Format returns the value-format part (low nibble) of the encoding.
func (e PtrEnc) Format() PtrEnc { return e & 0x0f }

// Application returns the base the value is relative to (bits 4-6).
func (e PtrEnc) Application() PtrEnc { return e & 0x70 }

// Indirect reports whether the decoded address holds the real pointer.
func (e PtrEnc) Indirect() bool { return e != PEOmit && e&PEIndirect != 0 }

// String formats the encoding the way readelf describes .eh_frame_hdr
// encodings ("sdata4, pcrel"), which keeps diagnostics familiar.
func (e PtrEnc) String() string {
	if e == PEOmit {
		return "omit"
	}
	var f string
	switch e & 0x0f {
	case PEULEB128:
		f = "uleb128"
	case PEUData2:
		f = "udata2"
	case PEUData4:
		f = "udata4"
	case PEUData8:
		f = "udata8"
	case PESLEB128:
		f = "sleb128"
	case PESData2:
		f = "sdata2"
	case PESData4:
		f = "sdata4"
	case PESData8:
		f = "sdata8"
	default:
		f = "<unknown format>"
	}
	var a string
	switch e & 0xf0 {
	case PEAbsPtr:
		a = "absolute"
	case PEPCRel:
		a = "pcrel"
	case PETextRel:
		a = "textrel"
	case PEDataRel:
		a = "datarel"
	case PEFuncRel:
		a = "funcrel"
	case PEAligned:
		a = "aligned"
	case PEIndirect:
		a = "indirect"
	default:
		a = "<unknown application method>"
	}
	return f + ", " + a
}

// SectionKind tells the two CFI section formats apart; they differ in CIE
// identification, CIE pointers and pointer encodings.
type SectionKind uint8

// Section kinds.
const (
	EHFrame    SectionKind = iota // .eh_frame (LSB/GCC exception frames)
	DebugFrame                    // .debug_frame (DWARF)
)

// String returns the section name the kind is stored in.
func (k SectionKind) String() string {
	return enumstr.Name([]string{EHFrame: ".eh_frame", DebugFrame: ".debug_frame"}, k, "SectionKind")
}

// RuleKind says how a register's value in the caller is recovered.
type RuleKind uint8

// Register rule kinds (DWARF 5 section 6.4.1). RuleUnspecified is the zero
// value: no instruction mentioned the register, so the ABI default applies.
const (
	RuleUnspecified   RuleKind = iota // no rule given; ABI default (readelf prints "u")
	RuleUndefined                     // not recoverable (DW_CFA_undefined)
	RuleSameValue                     // unchanged from the callee
	RuleOffset                        // saved at CFA+Offset
	RuleValOffset                     // value is CFA+Offset
	RuleRegister                      // saved in register Reg
	RuleExpression                    // saved at the address Expr computes (CFA pushed first)
	RuleValExpression                 // value is what Expr computes (CFA pushed first)
)

var ruleNames = [...]string{"unspecified", "undefined", "same_value", "offset", "val_offset", "register", "expression", "val_expression"}

// String returns a short lower-case name, also used as the JSON rule tag.
func (k RuleKind) String() string { return enumstr.Name(ruleNames[:], k, "RuleKind") }

// CFAKind says how the canonical frame address is computed.
type CFAKind uint8

// CFA rule kinds.
const (
	CFAUndefined  CFAKind = iota // no CFA rule set (only before any def_cfa)
	CFARegOffset                 // CFA = Reg + Offset
	CFAExpression                // CFA = value of Expr
)

// String returns a short lower-case name, also used as the JSON tag.
func (k CFAKind) String() string {
	return enumstr.Name([]string{CFAUndefined: "undefined", CFARegOffset: "reg_offset", CFAExpression: "expression"}, k, "CFAKind")
}

// EntryKind tells CIEs, FDEs and zero terminators apart during iteration.
type EntryKind uint8

// Entry kinds.
const (
	KindCIE        EntryKind = iota + 1 // Common Information Entry
	KindFDE                             // Frame Description Entry
	KindTerminator                      // zero length word ending .eh_frame
)

// String returns "CIE", "FDE" or "terminator".
func (k EntryKind) String() string {
	return enumstr.Name([]string{KindCIE: "CIE", KindFDE: "FDE", KindTerminator: "terminator"}, k, "EntryKind")
}
