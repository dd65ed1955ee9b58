package arch

import "strconv"

// Register name tables as binutils readelf prints them (dwarf.c), the one
// source of register names for every printer. Empty strings are numbers
// without a name; they print as rN.
var regNamesAMD64 = func() []string {
	n := []string{
		"rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp",
		"r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15", "rip",
	}
	for i := 0; i < 16; i++ {
		n = append(n, "xmm"+strconv.Itoa(i))
	}
	for i := 0; i < 8; i++ {
		n = append(n, "st"+strconv.Itoa(i))
	}
	for i := 0; i < 8; i++ {
		n = append(n, "mm"+strconv.Itoa(i))
	}
	n = append(n, "rflags", "es", "cs", "ss", "ds", "fs", "gs", "", "",
		"fs.base", "gs.base", "", "", "tr", "ldtr", "mxcsr", "fcw", "fsw")
	for i := 16; i < 32; i++ {
		n = append(n, "xmm"+strconv.Itoa(i))
	}
	for i := 83; i <= 117; i++ {
		n = append(n, "")
	}
	for i := 0; i < 8; i++ {
		n = append(n, "k"+strconv.Itoa(i))
	}
	return append(n, "bnd0", "bnd1", "bnd2", "bnd3")
}()

var regNamesARM64 = func() []string {
	var n []string
	for i := 0; i < 31; i++ {
		n = append(n, "x"+strconv.Itoa(i))
	}
	n = append(n, "sp", "", "elr")
	for i := 34; i < 46; i++ {
		n = append(n, "")
	}
	n = append(n, "vg", "ffr")
	for _, p := range []string{"p", "v", "z"} {
		c := 32
		if p == "p" {
			c = 16
		}
		for i := 0; i < c; i++ {
			n = append(n, p+strconv.Itoa(i))
		}
	}
	return n
}()

var regNamesS390X = func() []string {
	n := make([]string, 16)
	n = append(n, "f0", "f2", "f4", "f6", "f1", "f3", "f5", "f7",
		"f8", "f10", "f12", "f14", "f9", "f11", "f13", "f15")
	for i := 0; i < 16; i++ {
		n = append(n, "cr"+strconv.Itoa(i))
	}
	for i := 0; i < 16; i++ {
		n = append(n, "a"+strconv.Itoa(i))
	}
	return append(n, "pswm", "pswa", "", "",
		"v16", "v18", "v20", "v22", "v17", "v19", "v21", "v23",
		"v24", "v26", "v28", "v30", "v25", "v27", "v29", "v31")
}()

var regNamesI386 = func() []string {
	n := []string{"eax", "ecx", "edx", "ebx", "esp", "ebp", "esi", "edi", "eip", "eflags", ""}
	for i := 0; i < 8; i++ {
		n = append(n, "st"+strconv.Itoa(i))
	}
	n = append(n, "", "")
	for i := 0; i < 8; i++ {
		n = append(n, "xmm"+strconv.Itoa(i))
	}
	for i := 0; i < 8; i++ {
		n = append(n, "mm"+strconv.Itoa(i))
	}
	n = append(n, "fcw", "fsw", "mxcsr", "es", "cs", "ss", "ds", "fs", "gs", "", "", "tr", "ldtr")
	for i := 50; i <= 92; i++ {
		n = append(n, "")
	}
	for i := 0; i < 8; i++ {
		n = append(n, "k"+strconv.Itoa(i))
	}
	return n
}()

func (a Arch) regTable() []string {
	switch a {
	case AMD64:
		return regNamesAMD64
	case ARM64:
		return regNamesARM64
	case S390X:
		return regNamesS390X
	case I386:
		return regNamesI386
	}
	return nil
}

// NumRegNames returns the length of a's name table, readelf's
// dwarf_regnames_count (readelf calls larger numbers bad registers), or
// 0 for Unknown.
func (a Arch) NumRegNames() int { return len(a.regTable()) }

// regName returns the table name of r, or "" if it has none.
func (a Arch) regName(r Reg) string {
	t := a.regTable()
	if uint64(r) < uint64(len(t)) {
		return t[r]
	}
	return ""
}

// RegName returns the register's name as readelf prints it in a table
// column ("rsp", "x29", "f0"), or "rN" when the ABI gives it no name.
func (a Arch) RegName(r Reg) string {
	if s := a.regName(r); s != "" {
		return s
	}
	return "r" + strconv.FormatUint(uint64(r), 10)
}

// RegNameLong returns "rN (name)" for named registers and "rN" otherwise,
// the form readelf uses for DW_CFA_register targets.
func (a Arch) RegNameLong(r Reg) string {
	if s := a.regName(r); s != "" {
		return "r" + strconv.FormatUint(uint64(r), 10) + " (" + s + ")"
	}
	return "r" + strconv.FormatUint(uint64(r), 10)
}
