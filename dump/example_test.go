package dump_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/sframekit/sframekit/dump"
)

// Print an executable's SFrame section as objdump --sframe does. The
// dump of testdata/drap-O2.elf is compared with the one objdump 2.47
// printed, shipped beside it.
func ExampleWriteSFrameText() {
	const path = "../testdata/drap-O2.elf"
	in, err := dump.LoadELF(path, "")
	if err != nil {
		log.Fatal(err)
	}
	var b bytes.Buffer
	dump.WriteFileHeader(&b, filepath.Base(in.Path), in.Format) // objdump names the file as given
	if err := dump.WriteSFrameText(&b, in); err != nil {
		log.Fatal(err)
	}
	want, err := os.ReadFile(path + ".sframe.txt")
	if err != nil {
		log.Fatal(err)
	}
	// The beginning of the dump, up to the first function.
	sc := bufio.NewScanner(bytes.NewReader(b.Bytes()))
	for sc.Scan() && !strings.Contains(sc.Text(), "func idx [1]") {
		fmt.Println(strings.TrimRight(sc.Text(), " "))
	}
	fmt.Println("identical to objdump:", bytes.Equal(b.Bytes(), want))
	// Output:
	// drap-O2.elf:     file format elf64-x86-64
	//
	// Contents of the SFrame section .sframe:
	//   Header :
	//
	//     Version: SFRAME_VERSION_3
	//     Flags: SFRAME_F_FDE_SORTED,
	//            SFRAME_F_FDE_FUNC_START_PCREL
	//     CFA fixed RA offset: -8
	//     Num FDEs: 7
	//     Num FREs: 22
	//
	//   Function Index :
	//
	//     func idx [0]: pc = 0x1020, size = 16 bytes
	//     STARTPC         CFA       FP        RA
	//     0000000000001020  sp+16     u         f
	//     0000000000001026  sp+24     u         f
	//
	// identical to objdump: true
}

// Read the rules as values: SFrameJSON returns the JSON form that
// WriteSFrameJSON writes.
func ExampleSFrameJSON() {
	in, err := dump.LoadELF("../testdata/drap-O2.elf", "")
	if err != nil {
		log.Fatal(err)
	}
	j, err := dump.SFrameJSON(in)
	if err != nil {
		log.Fatal(err)
	}
	f := j.Functions[5] // realigned: a DRAP function, with a flexible FDE
	fmt.Printf("%#x %d %s, %d rows\n", f.Start, f.Size, f.FDEType, len(f.Rows))
	row, err := json.Marshal(f.Rows[3])
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(row))
	// Output:
	// 0x1190 239 flex, 6 rows
	// {"start":"0x11c6","cfa":{"kind":"deref","base":"fp","offset":-16},"ra":{"kind":"deref","base":"cfa","offset":-8,"fixed":true,"padding":true},"fp":{"kind":"deref","base":"fp","offset":0}}
}
