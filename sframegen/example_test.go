package sframegen_test

import (
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/sframekit/sframekit/cfi"
	"github.com/sframekit/sframekit/elffile"
	"github.com/sframekit/sframekit/sframe"
	"github.com/sframekit/sframekit/sframegen"
)

// sample is an executable shipped with the module: a PLT (PC-mask
// functions) and a DRAP function (a flexible FDE, v3 only).
const sample = "../testdata/drap-O2.elf"

// FromCFI generates SFrame from an executable's .eh_frame; the result is
// encoded for the address where elffile puts a new loadable segment, and
// added there, which is what sframe gen does.
func ExampleFromCFI() {
	src, err := os.ReadFile(sample)
	if err != nil {
		log.Fatal(err)
	}
	f, err := elffile.NewFile(src)
	if err != nil {
		log.Fatal(err)
	}
	res, err := sframegen.FromCFI(f.File, sframegen.Options{Version: sframe.Version3})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d FDEs -> %d SFrame functions, %d rows, %d flexible, %d left out\n",
		res.Stats.CFIFuncs, res.Stats.Funcs, res.Stats.Rows, res.Stats.Flex, res.Stats.SkippedFuncs)

	plan, err := elffile.PlanSFrameSegment(src)
	if err != nil {
		log.Fatal(err)
	}
	data, err := res.Encode(plan.Addr)
	if err != nil {
		log.Fatal(err)
	}
	out, err := elffile.AddSFrameSegment(src, plan, data)
	if err != nil {
		log.Fatal(err)
	}
	g, err := elffile.NewFile(out)
	if err != nil {
		log.Fatal(err)
	}
	sec := elffile.FindSFrame(g.File, "")
	fmt.Printf("new %s section at %#x, %d bytes\n", sec.Name, sec.Addr, sec.Size)
	// Output:
	// 7 FDEs -> 8 SFrame functions, 23 rows, 1 flexible, 0 left out
	// new .sframe section at 0x5040, 288 bytes
}

// ToVersion rewrites an executable's v3 .sframe as v2. Version 2 has no
// flexible FDEs: the DRAP function cannot be expressed, which is an
// error unless such functions are dropped.
func ExampleToVersion() {
	src, err := os.ReadFile(sample)
	if err != nil {
		log.Fatal(err)
	}
	_, err = sframegen.ToVersion(src, sframegen.ToVersionOptions{Version: sframe.Version2})
	var ue *sframegen.UnrepresentableError
	if errors.As(err, &ue) {
		for _, d := range ue.Funcs {
			fmt.Printf("cannot express %s\n", d)
		}
	}
	res, err := sframegen.ToVersion(src, sframegen.ToVersionOptions{Version: sframe.Version2, DropUnrepresentable: true})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s -> %s: %d functions, %d dropped, new segment: %v\n",
		res.From, sframe.Version2, res.Funcs, len(res.Dropped), res.Segment != nil)
	// Output:
	// cannot express function 5 at 0x1190 (realigned)
	// SFRAME_VERSION_3 -> SFRAME_VERSION_2: 6 functions, 1 dropped, new segment: false
}

// VerifyELF checks an executable's .sframe against its own .eh_frame at
// every row boundary. GNU ld's rows for .plt.got are a known deviation.
func ExampleVerifyELF() {
	f, err := elffile.Open(sample)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	rep, err := sframegen.VerifyELF(f.File, sframegen.VerifyELFOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d functions, %d PCs, %d disagreements, %d known, failed: %v\n",
		rep.Funcs, rep.PCs, rep.Unknown(), rep.Known(), rep.Failed())
	for _, l := range rep.LeftOut {
		fmt.Printf("left out: %s\n", l.Func)
	}
	// Output:
	// 6 functions, 25 PCs, 0 disagreements, 1 known, failed: false
	// left out: _start
}

// Verify compares any SFrame section with a CFI table: here the section
// FromCFI generates from the sample's .eh_frame, checked against it.
func ExampleVerify() {
	f, err := elffile.Open(sample)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	res, err := sframegen.FromCFI(f.File, sframegen.Options{})
	if err != nil {
		log.Fatal(err)
	}
	const addr = 0x10000
	data, err := res.Encode(addr)
	if err != nil {
		log.Fatal(err)
	}
	s, err := sframe.Parse(data, addr)
	if err != nil {
		log.Fatal(err)
	}
	tab, err := cfi.FromELF(f.File, ".eh_frame")
	if err != nil {
		log.Fatal(err)
	}
	rep, err := sframegen.Verify(tab, s, sframegen.VerifyOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d functions, %d PCs, %d disagreements, %d left out\n", rep.Funcs, rep.PCs, len(rep.Disagreements), len(rep.LeftOut))
	// Output:
	// 7 functions, 26 PCs, 0 disagreements, 0 left out
}
