package arch

import "testing"

// TestRegs checks Get, Set and Invalidate within each architecture's
// registers, and String's names.
func TestRegs(t *testing.T) {
	r := Regs{Arch: AMD64}
	if _, ok := r.Get(AMD64RSP); ok {
		t.Error("zero Regs has rsp")
	}
	if !r.Set(AMD64RSP, 0x10) || r.SP() != 0x10 {
		t.Error("Set rsp")
	}
	if r.Set(17, 1) || r.Set(^Reg(0), 1) || r.Set(64, 1) {
		t.Error("Set out of range accepted")
	}
	r.Invalidate(64) // out of range: ignored
	if !r.Set(AMD64RIP, 0x20) || r.String() != "rsp=0x10 rip=0x20" {
		t.Errorf("String: %q", r.String())
	}
	r.Invalidate(AMD64RSP)
	if _, ok := r.Get(AMD64RSP); ok {
		t.Error("Invalidate")
	}
	a := Regs{Arch: ARM64}
	if !a.Set(ARM64PC, 5) || a.PC() != 5 || !a.Set(ARM64SP, 6) || !a.Set(ARM64X29, 7) || a.String() != "x29=0x7 sp=0x6 pc=0x5" {
		t.Errorf("arm64: %q", a.String())
	}
	z := Regs{Arch: S390X}
	if !z.Set(S390XPC, 5) || !z.Set(17, 6) || z.String() != "f2=0x6 pc=0x5" {
		t.Errorf("s390x: %q", z.String())
	}
}
