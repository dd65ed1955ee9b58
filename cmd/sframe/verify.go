package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/sframekit/sframekit/sframegen"
)

func init() {
	register("verify", "check that an SFrame section recovers CFA, RA and FP as the DWARF CFI does", runVerify)
}

// verifyExit is what -h says about the exit status; README.md says the same.
const verifyExit = `Exit status: 0 when every file passes; 1 when a file fails (a disagreement
that is not a known toolchain deviation, or any with --strict; no function
compared) or cannot be checked (unreadable, no SFrame section or no CFI, an
SFrame section that does not parse or validate); 2 on a usage error.
`

func runVerify(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("verify", "FILE...", stdout, stderr)
	asJSON := fs.Bool("json", false, "print one JSON object per file (addresses as \"0x...\" strings; see README)")
	section := fs.String("section", "", "verify the SFrame section `NAME` (default .sframe or the SHT_GNU_SFRAME section)")
	cfiSec := fs.String("cfi", "", "compare with CFI `SECTION` (.eh_frame or .debug_frame; default .eh_frame, and .debug_frame for the functions it does not cover)")
	strict := fs.Bool("strict", false, "also fail on known toolchain deviations")
	fs.epilogue = verifyExit
	files, code, ok := fs.parse(args)
	if !ok {
		return code
	}
	if len(files) == 0 {
		return fs.noInput()
	}
	status := 0
	for _, path := range files {
		f, err := openELF(path)
		var rep *sframegen.Report
		if err == nil {
			rep, err = sframegen.VerifyELF(f.File, sframegen.VerifyELFOptions{SFrameSection: *section, CFISection: *cfiSec})
			f.Close()
		}
		if err != nil {
			fs.fileError(path, err)
			status = 1
			if *asJSON {
				// One object per file, whatever happened to it: a
				// reader of the stream knows of every file given.
				encodeJSON(stdout, struct {
					File  string `json:"file"`
					OK    bool   `json:"ok"`
					Error string `json:"error"`
				}{displayName(path), false, withoutPath(path, err).Error()})
			}
			continue
		}
		path = displayName(path)
		failed := rep.Failed() || (*strict && rep.Known() > 0)
		if failed {
			status = 1
		}
		if *asJSON {
			encodeJSON(stdout, struct {
				File string `json:"file"`
				OK   bool   `json:"ok"`
				*sframegen.Report
			}{path, !failed, rep})
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
		fmt.Fprintf(stdout, "%s: %s: %d functions, %d PCs checked, %d disagreements, %d known deviations, %d functions left out\n",
			path, verdict, rep.Funcs, rep.PCs, rep.Unknown(), rep.Known(), len(rep.LeftOut))
		if rep.Funcs == 0 {
			fmt.Fprintf(stdout, "%s: no function has both CFI and SFrame rows: nothing was compared\n", path)
		}
	}
	return status
}

// encodeJSON writes v as one line of JSON, names as they are (<stdin>,
// C++ templates), not HTML-escaped.
func encodeJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}
