package main

import (
	"bytes"
	"debug/elf"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sframekit/sframekit/elffile"
	"github.com/sframekit/sframekit/internal/corpus"
	"github.com/sframekit/sframekit/sframe"
)

// TestVerifyCommand runs sframe verify on a corpus executable (exit 0)
// and on a copy whose .sframe has one CFA offset changed in main (exit 1,
// naming main and the PC), in text and JSON.
func TestVerifyCommand(t *testing.T) {
	p := filepath.Join(corpus.Dir(t), "x86_64/v3/fp-O2.elf")
	var out, errb bytes.Buffer
	if rc := run([]string{"verify", p}, &out, &errb); rc != 0 || !strings.Contains(out.String(), ": OK: ") {
		t.Fatalf("verify %s: exit %d\n%s%s", p, rc, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "known: ") {
		t.Errorf("ld's .plt.got deviation not reported:\n%s", out.String())
	}
	// --strict fails on the known deviation.
	out.Reset()
	if rc := run([]string{"verify", "--strict", p}, &out, &errb); rc != 1 {
		t.Errorf("verify --strict: exit %d", rc)
	}

	src, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.NewFile(bytes.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	var mainAddr uint64
	syms, _ := f.Symbols()
	for _, s := range syms {
		if s.Name == "main" {
			mainAddr = s.Value
		}
	}
	sec := elffile.FindSFrame(f, "")
	idx := -1
	for i, s := range f.Sections {
		if s == sec {
			idx = i
		}
	}
	data, _ := sec.Data()
	s, err := sframe.Parse(data, sec.Addr)
	if err != nil {
		t.Fatal(err)
	}
	opts, funcs, err := sframe.Extract(s)
	if err != nil {
		t.Fatal(err)
	}
	var pc uint64
	for i := range funcs {
		if funcs[i].Start == mainAddr && len(funcs[i].Rows) > 1 {
			funcs[i].Rows[1].Row.CFA.Offset += 16
			pc = mainAddr + uint64(funcs[i].Rows[1].StartOff)
		}
	}
	if pc == 0 {
		t.Fatal("main has no second row")
	}
	enc, err := sframe.Encode(opts, funcs)
	if err != nil {
		t.Fatal(err)
	}
	bad, err := elffile.RewriteSections(src, []elffile.SectionUpdate{{Index: idx, Data: enc}})
	if err != nil {
		t.Fatal(err)
	}
	badPath := filepath.Join(t.TempDir(), "bad.elf")
	if err := os.WriteFile(badPath, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	rc := run([]string{"verify", badPath}, &out, &errb)
	want := fmt.Sprintf("function main [%#x,", mainAddr)
	at := fmt.Sprintf(") at %#x: CFA: ", pc)
	if rc != 1 || !strings.Contains(out.String(), want) || !strings.Contains(out.String(), at) || !strings.Contains(out.String(), "FAILED") {
		t.Errorf("verify of corrupted copy: exit %d, want %q and %q in:\n%s", rc, want, at, out.String())
	}
	out.Reset()
	rc = run([]string{"verify", "--json", badPath}, &out, &errb)
	var rep struct {
		OK            bool `json:"ok"`
		Disagreements []struct {
			Func string `json:"func"`
			PC   string `json:"pc"`
			What string `json:"what"`
		} `json:"disagreements"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("JSON: %v\n%s", err, out.String())
	}
	found := false
	for _, d := range rep.Disagreements {
		found = found || (d.Func == "main" && d.PC == fmt.Sprintf("%#x", pc) && d.What == "CFA")
	}
	if rc != 1 || rep.OK || !found {
		t.Errorf("verify --json: exit %d, ok %v, %+v", rc, rep.OK, rep.Disagreements)
	}
}
