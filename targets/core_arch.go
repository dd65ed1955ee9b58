package targets

import (
	"encoding/binary"
	"fmt"

	"github.com/sframekit/sframekit/arch"
)

// Register layouts of the NT_PRSTATUS and NT_PRFPREG notes of each
// architecture. The elf_prstatus around pr_reg has the same layout on
// every 64-bit Linux architecture (pr_reg at offset 112); only pr_reg
// differs: the kernel's elf_gregset_t, which qemu-user and gdb's gcore
// write the same way.
const (
	ntPRFPREG = 2

	// s390x: struct s390_regs: psw.mask, psw.addr, gprs[16], acrs[16]
	// (32-bit each, 8 words) and orig_gpr2.
	s390xNumUser = 27
	s390xPSWAddr = 1
	s390xGPRs    = 2
	// s390x NT_PRFPREG: s390_fp_regs: fpc (32-bit), padding, fprs[16].
	s390xFPRsOff = 8
)

// prstatusRegs decodes the pr_reg field of an NT_PRSTATUS note desc of
// machine, in byte order bo.
func prstatusRegs(a arch.Arch, desc []byte, bo binary.ByteOrder) (arch.Regs, error) {
	nregs := 0
	switch a {
	case arch.AMD64:
		nregs = amd64NumUser
	case arch.ARM64:
		nregs = arm64NumUser
	case arch.S390X:
		nregs = s390xNumUser
	default:
		return arch.Regs{}, fmt.Errorf("NT_PRSTATUS of unsupported architecture %v", a)
	}
	if len(desc) < prstatusReg+8*nregs {
		return arch.Regs{}, fmt.Errorf("NT_PRSTATUS: %d bytes, want at least %d", len(desc), prstatusReg+8*nregs)
	}
	word := func(i int) uint64 { return bo.Uint64(desc[prstatusReg+8*i:]) }
	switch a {
	case arch.ARM64:
		var u [arm64NumUser]uint64
		for i := range u {
			u[i] = word(i)
		}
		return arm64FromUser(&u), nil
	case arch.S390X:
		var u [s390xNumUser]uint64
		for i := range u {
			u[i] = word(i)
		}
		return s390xFromUser(&u), nil
	}
	var u [amd64NumUser]uint64
	for i := range u {
		u[i] = word(i)
	}
	return amd64FromUser(&u), nil
}

// s390xFromUser converts the 27 words of an s390x s390_regs (pr_reg):
// the PSW address becomes the PC (arch.S390XPC), gprs r0-r15 DWARF 0-15, and
// the PSW mask Flags. The floating-point registers come from NT_PRFPREG
// (addS390XFPRs).
func s390xFromUser(u *[s390xNumUser]uint64) arch.Regs {
	r := arch.Regs{Arch: arch.S390X}
	copy(r.R[:16], u[s390xGPRs:s390xGPRs+16])
	r.R[arch.S390XPC] = u[s390xPSWAddr]
	r.Valid = 1<<(arch.S390XR15+1) - 1 | 1<<arch.S390XPC
	r.Flags = u[0]
	return r
}

// addS390XFPRs stores the floating-point registers of an s390x NT_PRFPREG
// note desc in r, as gdb reads them (DWARF 16-31): the kernel and gdb's
// gcore write one after each thread's NT_PRSTATUS; qemu-user writes none.
// Compilers spill call-saved general registers of leaf functions into
// them, and say so in the CFI.
func addS390XFPRs(r *arch.Regs, desc []byte, bo binary.ByteOrder) error {
	if len(desc) < s390xFPRsOff+16*8 {
		return fmt.Errorf("NT_PRFPREG: %d bytes, want at least %d", len(desc), s390xFPRsOff+16*8)
	}
	for i := range 16 {
		d := arch.S390XFPR(i) // the ABI interleaves even and odd registers
		r.R[d] = bo.Uint64(desc[s390xFPRsOff+8*i:])
		r.Valid |= 1 << d
	}
	return nil
}
