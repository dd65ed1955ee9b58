package sframe

import (
	"fmt"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/internal/enumstr"
)

// Magic is the value of the first two bytes of every SFrame section, in
// the section's byte order.
const Magic = 0xdee2

// Version is an SFrame format version.
type Version uint8

// The known SFrame versions.
const (
	Version1 Version = 1
	Version2 Version = 2
	Version3 Version = 3
)

// String returns the name binutils uses for the version.
func (v Version) String() string {
	if v >= 1 && v <= 3 {
		return fmt.Sprintf("SFRAME_VERSION_%d", uint8(v))
	}
	return fmt.Sprintf("Version(%d)", uint8(v))
}

// Flags are the section-wide flags of the preamble.
type Flags uint8

// Section flags.
const (
	// FlagFDESorted says the function index is sorted by start address,
	// which allows binary search.
	FlagFDESorted Flags = 0x1
	// FlagFramePointer (v1, v2) says all functions keep a frame pointer.
	FlagFramePointer Flags = 0x2
	// FlagFuncStartPCRel (v2 errata 1, v3) says function start fields are
	// relative to the field itself rather than to the section start.
	FlagFuncStartPCRel Flags = 0x4
)

// KnownFlags returns the flags defined for version v; others are unknown.
func KnownFlags(v Version) Flags {
	switch v {
	case Version1:
		return FlagFDESorted | FlagFramePointer
	case Version2:
		return FlagFDESorted | FlagFramePointer | FlagFuncStartPCRel
	default:
		return FlagFDESorted | FlagFuncStartPCRel
	}
}

// String returns the flag names joined by "|", or "NONE".
func (f Flags) String() string {
	if f == 0 {
		return "NONE"
	}
	s := ""
	add := func(bit Flags, name string) {
		if f&bit != 0 {
			if s != "" {
				s += "|"
			}
			s += name
			f &^= bit
		}
	}
	add(FlagFDESorted, "SFRAME_F_FDE_SORTED")
	add(FlagFramePointer, "SFRAME_F_FRAME_POINTER")
	add(FlagFuncStartPCRel, "SFRAME_F_FDE_FUNC_START_PCREL")
	if f != 0 {
		if s != "" {
			s += "|"
		}
		s += fmt.Sprintf("%#x", uint8(f))
	}
	return s
}

// ABI identifies the ABI/architecture a section describes.
type ABI uint8

// The ABIs defined by the format.
const (
	ABIAArch64BE ABI = 1
	ABIAArch64LE ABI = 2
	ABIAMD64LE   ABI = 3
	ABIS390XBE   ABI = 4
)

// String returns the name binutils uses for the ABI (SFRAME_ABI_...).
func (a ABI) String() string {
	switch a {
	case ABIAArch64BE:
		return "SFRAME_ABI_AARCH64_ENDIAN_BIG"
	case ABIAArch64LE:
		return "SFRAME_ABI_AARCH64_ENDIAN_LITTLE"
	case ABIAMD64LE:
		return "SFRAME_ABI_AMD64_ENDIAN_LITTLE"
	case ABIS390XBE:
		return "SFRAME_ABI_S390X_ENDIAN_BIG"
	}
	return fmt.Sprintf("ABI(%d)", uint8(a))
}

// BigEndian reports whether the ABI stores its data big-endian.
func (a ABI) BigEndian() bool { return a == ABIAArch64BE || a == ABIS390XBE }

// Arch returns the architecture of the ABI, or arch.Unknown: it names
// the registers (Arch().SP(), Arch().FP()) that rules are based on.
func (a ABI) Arch() arch.Arch {
	switch a {
	case ABIAMD64LE:
		return arch.AMD64
	case ABIAArch64BE, ABIAArch64LE:
		return arch.ARM64
	case ABIS390XBE:
		return arch.S390X
	}
	return arch.Unknown
}

// ABIFor returns the ABI of architecture a in the given byte order, and
// false if SFrame has none. The byte order matters only for AArch64: the
// other ABIs exist in one (AMD64 little-endian, s390x big-endian).
func ABIFor(a arch.Arch, bigEndian bool) (ABI, bool) {
	switch a {
	case arch.AMD64:
		return ABIAMD64LE, true
	case arch.ARM64:
		if bigEndian {
			return ABIAArch64BE, true
		}
		return ABIAArch64LE, true
	case arch.S390X:
		return ABIS390XBE, true
	}
	return 0, false
}

// FREType is the width of an FRE's start-address field.
type FREType uint8

// FRE types.
const (
	FREAddr1 FREType = 0
	FREAddr2 FREType = 1
	FREAddr4 FREType = 2
)

// Size returns the width of the start-address field in bytes, or 0 for
// an invalid type.
func (t FREType) Size() int {
	switch t {
	case FREAddr1:
		return 1
	case FREAddr2:
		return 2
	case FREAddr4:
		return 4
	}
	return 0
}

// String returns the name binutils uses for the FRE type.
func (t FREType) String() string {
	return enumstr.Name(freTypeNames[:], t, "FREType")
}

var freTypeNames = [...]string{
	FREAddr1: "SFRAME_FRE_TYPE_ADDR1",
	FREAddr2: "SFRAME_FRE_TYPE_ADDR2",
	FREAddr4: "SFRAME_FRE_TYPE_ADDR4",
}

// PCType says how FRE start addresses are matched against a PC.
type PCType uint8

// PC types.
const (
	// PCInc FREs start at an offset from the function start.
	PCInc PCType = 0
	// PCMask FREs match (pc - start) % RepSize: repeated blocks such as
	// PLT entries.
	PCMask PCType = 1
)

// String returns the name binutils uses for the PC type.
func (t PCType) String() string {
	if t == PCMask {
		return "SFRAME_FDE_PCTYPE_MASK"
	}
	return "SFRAME_FDE_PCTYPE_INC"
}

// FDEType (v3) says how an FRE's data words are interpreted.
type FDEType uint8

// FDE types.
const (
	// FDEDefault rows hold ABI-specific stack offsets.
	FDEDefault FDEType = 0
	// FDEFlex rows hold (control, offset) pairs for CFA, RA and FP.
	FDEFlex FDEType = 1
)

// String returns the name binutils uses for the FDE type.
func (t FDEType) String() string {
	return enumstr.Name([]string{FDEDefault: "SFRAME_FDE_TYPE_DEFAULT", FDEFlex: "SFRAME_FDE_TYPE_FLEX"}, t, "FDEType")
}

// RegCFA is the base of rules relative to the canonical frame address.
// It is no register number: the largest arch.Reg, far above MaxReg.
const RegCFA = ^arch.Reg(0)

// RuleKind says how a tracked value (CFA, RA or FP) is recovered.
type RuleKind uint8

// Rule kinds.
const (
	// RuleUnspecified: the row has no rule for the value; it keeps the
	// value it had in the callee (FP not saved yet, s390x RA still in
	// its register). Dumps print it as "u".
	RuleUnspecified RuleKind = iota
	// RuleNotSaved: an explicit padding word says the value is not saved
	// on the stack (printed "U").
	RuleNotSaved
	// RuleValue: the value is Base + Offset.
	RuleValue
	// RuleDeref: the value is stored at address Base + Offset.
	RuleDeref
)

// String returns the kind's name, as the JSON form uses it.
func (k RuleKind) String() string {
	return enumstr.Name(ruleKindNames[:], k, "RuleKind")
}

var ruleKindNames = [...]string{
	RuleUnspecified: "unspecified",
	RuleNotSaved:    "not-saved",
	RuleValue:       "value",
	RuleDeref:       "deref",
}

// Rule recovers one value of the caller's frame.
type Rule struct {
	Kind   RuleKind
	Base   arch.Reg // RegCFA or a DWARF register number
	Offset int64    // added to Base
	// Fixed is set when the rule comes from the header's fixed offset
	// rather than from the row (AMD64's RA at CFA-8).
	Fixed bool
	// Padding is set on a Fixed RA rule that the row spells as an explicit
	// padding word (flexible FDEs on AMD64, where the RA entry precedes
	// FP): the RA is at the header's fixed offset. objdump prints it "U",
	// as it prints RuleNotSaved.
	Padding bool
}

// String writes the rule as one reads it: "cfa+16" or "r7+16" for a
// value (base register by DWARF number, cfa for RegCFA), "(cfa-8)" for a
// value stored at that address, "unspecified" and "not-saved" for the
// others. Fixed and Padding, which say where in the FRE the rule came
// from, do not change the text: the rule means the same either way.
func (r Rule) String() string {
	base := "cfa"
	if r.Base != RegCFA {
		base = fmt.Sprintf("r%d", r.Base)
	}
	switch r.Kind {
	case RuleValue:
		return fmt.Sprintf("%s%+d", base, r.Offset)
	case RuleDeref:
		return fmt.Sprintf("(%s%+d)", base, r.Offset)
	}
	return r.Kind.String()
}

// Row is the interpretation of one FRE: how to find the CFA, the return
// address and the frame pointer of the caller.
type Row struct {
	CFA, RA, FP Rule
	// RAUndefined marks an outermost frame: the stack trace ends here.
	RAUndefined bool
	// RASigned (AArch64) says the saved return address is signed (PAC).
	RASigned bool
}
