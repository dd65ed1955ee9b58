package main

import (
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"

	"github.com/sframekit/sframekit/convert"
)

func init() {
	register("verify", "check that an SFrame section recovers CFA, RA and FP as the DWARF CFI does", runVerify)
}

func runVerify(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("verify", "FILE...", stderr)
	asJSON := fs.Bool("json", false, "print one JSON object per file")
	section := fs.String("section", "", "verify the SFrame section `NAME` (default .sframe or the SHT_GNU_SFRAME section)")
	cfiSec := fs.String("cfi", "", "compare with CFI `SECTION` (.eh_frame or .debug_frame; default .eh_frame if present)")
	strict := fs.Bool("strict", false, "also fail on known toolchain deviations")
	files, code, ok := parseOperands(fs, args)
	if !ok {
		return code
	}
	if len(files) == 0 {
		fmt.Fprintln(stderr, "sframe verify: need at least one file")
		fs.Usage()
		return 2
	}
	status := 0
	for _, path := range files {
		f, err := elf.Open(path)
		if err != nil {
			fmt.Fprintf(stderr, "sframe verify: %v\n", err)
			status = max(status, 2)
			continue
		}
		rep, err := convert.VerifyELF(f, *section, *cfiSec)
		f.Close()
		if err != nil {
			fmt.Fprintf(stderr, "sframe verify: %s: %v\n", path, err)
			status = max(status, 2)
			continue
		}
		failed := rep.Failed() || (*strict && len(rep.Disagreements) > 0)
		if failed {
			status = max(status, 1)
		}
		if *asJSON {
			b, _ := json.Marshal(struct {
				File string `json:"file"`
				OK   bool   `json:"ok"`
				*convert.Report
			}{path, !failed, rep})
			fmt.Fprintf(stdout, "%s\n", b)
			continue
		}
		for _, d := range rep.Disagreements {
			fmt.Fprintf(stdout, "%s: %s\n", path, d)
		}
		for _, l := range rep.LeftOut {
			name := l.Func
			if name == "" {
				name = "?"
			}
			how := "not described by SFrame"
			if l.NoRows {
				how = "described by SFrame without rows"
			}
			fmt.Fprintf(stdout, "%s: function %s [%#x,%#x) %s\n", path, name, l.Start, l.End, how)
		}
		verdict := "OK"
		if failed {
			verdict = "FAILED"
		}
		fmt.Fprintf(stdout, "%s: %s: %d functions, %d PCs checked, %d disagreements, %d functions left out\n",
			path, verdict, rep.Funcs, rep.PCs, len(rep.Disagreements), len(rep.LeftOut))
	}
	return status
}
