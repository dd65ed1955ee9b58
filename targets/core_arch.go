package targets

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
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

// s390xFPRDWARF maps f0..f15 to their DWARF numbers, which interleave the
// even and odd registers (the s390x ELF ABI supplement, table 1.17).
var s390xFPRDWARF = [16]int{16, 20, 17, 21, 18, 22, 19, 23, 24, 28, 25, 29, 26, 30, 27, 31}

// prstatusRegs decodes the pr_reg field of an NT_PRSTATUS note desc of
// machine, in byte order bo.
func prstatusRegs(machine elf.Machine, desc []byte, bo binary.ByteOrder) (Regs, error) {
	nregs := 0
	switch machine {
	case elf.EM_X86_64:
		nregs = amd64NumUser
	case elf.EM_AARCH64:
		nregs = arm64NumUser
	case elf.EM_S390:
		nregs = s390xNumUser
	default:
		return Regs{}, fmt.Errorf("NT_PRSTATUS of unsupported machine %v", machine)
	}
	if len(desc) < prstatusReg+8*nregs {
		return Regs{}, fmt.Errorf("NT_PRSTATUS: %d bytes, want at least %d", len(desc), prstatusReg+8*nregs)
	}
	word := func(i int) uint64 { return bo.Uint64(desc[prstatusReg+8*i:]) }
	switch machine {
	case elf.EM_AARCH64:
		var u [arm64NumUser]uint64
		for i := range u {
			u[i] = word(i)
		}
		return arm64FromUser(&u), nil
	case elf.EM_S390:
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
// the PSW address becomes the PC (S390XPC), gprs r0-r15 DWARF 0-15, and
// the PSW mask Flags. The floating-point registers come from NT_PRFPREG
// (addS390XFPRs).
func s390xFromUser(u *[s390xNumUser]uint64) Regs {
	r := Regs{Arch: elf.EM_S390}
	copy(r.R[:16], u[s390xGPRs:s390xGPRs+16])
	r.R[S390XPC] = u[s390xPSWAddr]
	r.Valid = 1<<16 - 1 | 1<<S390XPC
	r.Flags = u[0]
	return r
}

// addS390XFPRs stores the floating-point registers of an s390x NT_PRFPREG
// note desc in r, as gdb reads them (DWARF 16-31): the kernel and gdb's
// gcore write one after each thread's NT_PRSTATUS; qemu-user writes none.
// Compilers spill call-saved general registers of leaf functions into
// them, and say so in the CFI.
func addS390XFPRs(r *Regs, desc []byte, bo binary.ByteOrder) error {
	if len(desc) < s390xFPRsOff+16*8 {
		return fmt.Errorf("NT_PRFPREG: %d bytes, want at least %d", len(desc), s390xFPRsOff+16*8)
	}
	for i, d := range s390xFPRDWARF {
		r.R[d] = bo.Uint64(desc[s390xFPRsOff+8*i:])
		r.Valid |= 1 << uint(d)
	}
	return nil
}
