package arch

import (
	"debug/elf"
	"os"
	"strconv"
	"testing"
)

// TestConstantsMatchNames checks each register constant against readelf's
// name table, so that a number typed wrong in one place shows.
func TestConstantsMatchNames(t *testing.T) {
	amd64 := []string{"rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp",
		"r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15", "rip"}
	for i, r := range []Reg{AMD64RAX, AMD64RDX, AMD64RCX, AMD64RBX, AMD64RSI, AMD64RDI, AMD64RBP, AMD64RSP,
		AMD64R8, AMD64R9, AMD64R10, AMD64R11, AMD64R12, AMD64R13, AMD64R14, AMD64R15, AMD64RIP} {
		if got := AMD64.RegName(r); got != amd64[i] {
			t.Errorf("AMD64 register %d is named %q, want %q", r, got, amd64[i])
		}
	}
	for r, want := range map[Reg]string{AMD64RFLAGS: "rflags", AMD64ES: "es", AMD64CS: "cs", AMD64SS: "ss", AMD64DS: "ds", AMD64FS: "fs", AMD64GS: "gs"} {
		if got := AMD64.RegName(r); got != want {
			t.Errorf("AMD64 register %d is named %q, want %q", r, got, want)
		}
	}
	if got := ARM64.RegName(ARM64VG); got != "vg" {
		t.Errorf("ARM64VG is named %q", got)
	}
	arm64 := []Reg{ARM64X0, ARM64X1, ARM64X2, ARM64X3, ARM64X4, ARM64X5, ARM64X6, ARM64X7, ARM64X8, ARM64X9,
		ARM64X10, ARM64X11, ARM64X12, ARM64X13, ARM64X14, ARM64X15, ARM64X16, ARM64X17, ARM64X18, ARM64X19,
		ARM64X20, ARM64X21, ARM64X22, ARM64X23, ARM64X24, ARM64X25, ARM64X26, ARM64X27, ARM64X28, ARM64X29, ARM64X30}
	for i, r := range arm64 {
		if got, want := ARM64.RegName(r), "x"+strconv.Itoa(i); got != want {
			t.Errorf("ARM64 register %d is named %q, want %q", r, got, want)
		}
	}
	s390x := []Reg{S390XR0, S390XR1, S390XR2, S390XR3, S390XR4, S390XR5, S390XR6, S390XR7,
		S390XR8, S390XR9, S390XR10, S390XR11, S390XR12, S390XR13, S390XR14, S390XR15}
	for i, r := range s390x {
		// readelf names no general register of s390x: they print as rN.
		if got, want := S390X.RegName(r), "r"+strconv.Itoa(i); got != want {
			t.Errorf("S390X register %d is named %q, want %q", r, got, want)
		}
	}
	for i := 0; i < 16; i++ {
		if got, want := S390X.RegName(S390XFPR(i)), "f"+strconv.Itoa(i); got != want {
			t.Errorf("S390XFPR(%d) = %d, named %q", i, S390XFPR(i), got)
		}
	}
	if S390XFPR(-1) != 0 || S390XFPR(16) != 0 {
		t.Error("S390XFPR out of range")
	}
	if ARM64.RegName(ARM64SP) != "sp" || ARM64FP != ARM64X29 || ARM64LR != ARM64X30 {
		t.Errorf("ARM64 sp, fp, lr: %q %d %d", ARM64.RegName(ARM64SP), ARM64FP, ARM64LR)
	}
	// The s390x PC slot is not a DWARF number of the PC: 32 is cr0, and
	// the first floating-point register (f0) is 16.
	if S390X.RegName(S390XPC) != "cr0" || S390X.RegName(16) != "f0" || S390X.RegName(S390XPC-1) != "f15" {
		t.Errorf("s390x 16, 31, 32: %q %q %q", S390X.RegName(16), S390X.RegName(S390XPC-1), S390X.RegName(S390XPC))
	}
}

// TestTracked checks SP, FP, RA and PC of each architecture by name.
func TestTracked(t *testing.T) {
	for _, c := range []struct {
		a              Arch
		sp, fp, ra, pc string
		link           bool
		spOff          int64
	}{
		{AMD64, "rsp", "rbp", "rip", "rip", false, 0},
		{ARM64, "sp", "x29", "x30", "r32", true, 0},
		{S390X, "r15", "r11", "r14", "cr0", true, -160},
		{I386, "esp", "ebp", "eip", "eip", false, 0},
	} {
		got := [4]string{c.a.RegName(c.a.SP()), c.a.RegName(c.a.FP()), c.a.RegName(c.a.RA()), c.a.RegName(c.a.PC())}
		if got != [4]string{c.sp, c.fp, c.ra, c.pc} || c.a.HasLinkReg() != c.link || c.a.SPOffset() != c.spOff {
			t.Errorf("%s: SP, FP, RA, PC %q, link register %v, SP offset %d", c.a, got, c.a.HasLinkReg(), c.a.SPOffset())
		}
	}
	if Unknown.SP() != 0 || Unknown.PC() != 0 || Arch(200).FP() != 0 || Unknown.NumRegNames() != 0 || Arch(200).RegName(7) != "r7" {
		t.Error("Unknown or out-of-range Arch has registers")
	}
}

// TestNames checks the printed forms and the table sizes readelf's
// "bad register" limit depends on.
func TestNames(t *testing.T) {
	for _, c := range []struct {
		a         Arch
		r         Reg
		name      string
		long      string
		tableSize int
	}{
		{AMD64, 7, "rsp", "r7 (rsp)", 130},
		{AMD64, 200, "r200", "r200", 130},
		{ARM64, 32, "r32", "r32", 128},
		{S390X, 65, "pswa", "r65 (pswa)", 84},
		{I386, 4, "esp", "r4 (esp)", 101},
		{Unknown, 70000, "r70000", "r70000", 0},
	} {
		if got, long, n := c.a.RegName(c.r), c.a.RegNameLong(c.r), c.a.NumRegNames(); got != c.name || long != c.long || n != c.tableSize {
			t.Errorf("%s register %d: %q, %q, table of %d; want %q, %q, %d", c.a, c.r, got, long, n, c.name, c.long, c.tableSize)
		}
	}
}

// TestFromELF checks the ELF machine mapping, and that the machine of
// this test binary is the host's.
func TestFromELF(t *testing.T) {
	for m, want := range map[elf.Machine]Arch{elf.EM_X86_64: AMD64, elf.EM_AARCH64: ARM64, elf.EM_S390: S390X,
		elf.EM_386: I386, elf.EM_RISCV: Unknown, elf.EM_NONE: Unknown} {
		if got := FromELF(m); got != want {
			t.Errorf("FromELF(%v) = %v, want %v", m, got, want)
		}
	}
	for a, want := range map[Arch]string{AMD64: "x86-64", ARM64: "aarch64", S390X: "s390x", I386: "i386", Unknown: "unknown", 9: "unknown"} {
		if a.String() != want {
			t.Errorf("Arch(%d).String() = %q, want %q", uint8(a), a.String(), want)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	f, err := elf.Open(exe)
	if err != nil {
		t.Skipf("test binary is not ELF: %v", err)
	}
	defer f.Close()
	if got := FromELF(f.Machine); got != Host() {
		t.Errorf("test binary is %v (%v), Host() = %v", f.Machine, got, Host())
	}
}
