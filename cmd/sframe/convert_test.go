package main

import (
	"bytes"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sframekit/sframekit/elffile"
	"github.com/sframekit/sframekit/internal/corpus"
	"github.com/sframekit/sframekit/internal/testprog"
	"github.com/sframekit/sframekit/sframe"
)

var funcLine = regexp.MustCompile(`^    func idx \[\d+\]: (pc = .*)$`)

// dumpBlocks splits an objdump-style SFrame dump into function blocks
// (the function line without its index, then its rows), keyed by the
// function line; functions at the same address (in different sections
// of an object) keep their order.
func dumpBlocks(text string) (map[string][]string, int) {
	m := map[string][]string{}
	n := 0
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		mm := funcLine.FindStringSubmatch(lines[i])
		if mm == nil {
			continue
		}
		var b strings.Builder
		b.WriteString(mm[1] + "\n")
		for i++; i < len(lines) && lines[i] != ""; i++ {
			b.WriteString(lines[i] + "\n")
		}
		key := mm[1]
		m[key] = append(m[key], b.String())
		n++
	}
	return m, n
}

// flexRegSave is a register save of a flexible FDE in objdump's dump,
// "r17+0", padded to its column.
var flexRegSave = regexp.MustCompile(`\br(\d+)\+0( *)`)

// asV2 turns the blocks of a v3 dump into those v2 prints for the same
// functions: an s390x flexible FDE whose register saves v2 encodes (an
// odd data word) becomes a default one, its "rN+0" printed "rN".
func asV2(blocks map[string][]string) map[string][]string {
	out := map[string][]string{}
	for k, bs := range blocks {
		nk, flex := strings.CutSuffix(k, `, attr = "F"`)
		for _, b := range bs {
			if flex {
				b = strings.Replace(b, k, nk, 1)
				b = flexRegSave.ReplaceAllString(b, "r${1}  $2")
			}
			out[nk] = append(out[nk], b)
		}
	}
	return out
}

// compareBlocks checks that every function present in both dumps has the
// same block, and returns how many were compared.
func compareBlocks(t *testing.T, what string, got, want map[string][]string) int {
	t.Helper()
	n := 0
	for k, gs := range got {
		ws, ok := want[k]
		if !ok {
			continue
		}
		for i := 0; i < len(gs) && i < len(ws); i++ {
			if gs[i] != ws[i] {
				t.Errorf("%s: function %s differs:\n got:\n%s want:\n%s", what, k, gs[i], ws[i])
			}
			n++
		}
	}
	return n
}

func dumpOf(t *testing.T, args ...string) string {
	t.Helper()
	out, errs, code := runCLI(t, append([]string{"dump"}, args...)...)
	if code != 0 {
		t.Fatalf("dump %v: status %d: %s", args, code, errs)
	}
	return out
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// convertOK runs sframe convert and fails the test unless it succeeds;
// it also checks the input is unchanged.
func convertOK(t *testing.T, args ...string) string {
	t.Helper()
	in := args[len(args)-1]
	before := mustRead(t, in)
	out, errs, code := runCLI(t, append([]string{"convert"}, args...)...)
	if code != 0 {
		t.Fatalf("convert %v: status %d: %s", args, code, errs)
	}
	if !bytes.Equal(before, mustRead(t, in)) {
		t.Fatalf("convert modified its input %s", in)
	}
	return out + errs
}

func hasReadelf() bool {
	_, err := exec.LookPath("readelf")
	return err == nil
}

// checkReadelf runs the system readelf -S -r -W on path and checks it
// reports no problem and shows the relocation type.
func checkReadelf(t *testing.T, path, relType string) {
	t.Helper()
	if !hasReadelf() {
		return
	}
	cmd := exec.Command("readelf", "-S", "-r", "-W", path)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil || stderr.Len() != 0 {
		t.Errorf("readelf -S -r %s: %v: %s", path, err, stderr.String())
	}
	out := stdout.String()
	if !strings.Contains(out, "Relocation section '.rela.sframe'") || !strings.Contains(out, relType) {
		t.Errorf("readelf -r %s: no .rela.sframe with %s:\n%s", path, relType, out)
	}
	if strings.Contains(strings.ToLower(out), "warning") {
		t.Errorf("readelf %s warns:\n%s", path, out)
	}
}

var knownGasDifferences = map[string][]string{
	"edge-x86_64.o":  {"pc = 0x0, size = 15 bytes"},
	"edge-aarch64.o": {"pc = 0x70, size = 12 bytes"},
}

var relTypes = map[string][2]string{
	"x86_64":  {"R_X86_64_PC32", "R_X86_64_PC64"},
	"aarch64": {"R_AARCH64_PREL32", "R_AARCH64_PREL64"},
	"s390x":   {"R_390_PC32", "R_390_PC64"},
}

// TestConvertObjectsToV3 converts every v1 and v2 relocatable object of
// the corpus to v3 and compares the dump, function by function, with the
// dump of binutils 2.47's own v3 object of the same source; then converts
// back to v2 and checks the functions and rows survive.
func TestConvertObjectsToV3(t *testing.T) {
	dir := t.TempDir()
	compared, files := 0, 0
	for _, path := range corpus.ELFs(t) {
		ver := filepath.Base(filepath.Dir(path))
		arch := filepath.Base(filepath.Dir(filepath.Dir(path)))
		if !strings.HasSuffix(path, ".o") || (ver != "v1" && ver != "v2") {
			continue
		}
		name := filepath.Base(path)
		ref := filepath.Join(filepath.Dir(filepath.Dir(path)), "v3", name+".sframe.txt")
		out3 := filepath.Join(dir, arch+"-"+ver+"-"+name+".v3.o")
		convertOK(t, "--to-version", "3", "-o", out3, path)
		got := dumpOf(t, out3)
		gotBlocks, nGot := dumpBlocks(got)
		if !strings.Contains(got, "Version: SFRAME_VERSION_3") || nGot == 0 {
			t.Errorf("%s: converted dump:\n%s", path, got)
			continue
		}
		if want, err := os.ReadFile(ref); err == nil {
			wantBlocks, _ := dumpBlocks(string(want))
			// gas before 2.46 did not turn ".cfi_undefined" of the RA
			// (outermost frame) into an RA-undefined row; the v1/v2
			// input already says sp+8 there, which the conversion
			// keeps.
			for _, k := range knownGasDifferences[name] {
				delete(wantBlocks, k)
			}
			compared += compareBlocks(t, path+" -> v3 vs "+ref, gotBlocks, wantBlocks)
		}
		checkReadelf(t, out3, relTypes[arch][1])
		f, err := elf.Open(out3)
		if err != nil {
			t.Fatal(err)
		}
		if sec := elffile.FindSFrame(f, ""); sec == nil || sec.Type != elffile.SHT_GNU_SFRAME {
			t.Errorf("%s: .sframe not of type SHT_GNU_SFRAME", out3)
		}
		f.Close()

		// And back to v2: the same functions and rows.
		out2 := filepath.Join(dir, arch+"-"+ver+"-"+name+".v2.o")
		convertOK(t, "--to-version", "2", "-o", out2, out3)
		back := dumpOf(t, out2)
		backBlocks, nBack := dumpBlocks(back)
		if !strings.Contains(back, "Version: SFRAME_VERSION_2") || nBack != nGot {
			t.Errorf("%s: back to v2: %d functions, want %d", path, nBack, nGot)
		}
		if n := compareBlocks(t, out2+" vs "+out3, backBlocks, gotBlocks); n != nGot {
			t.Errorf("%s: back to v2: %d functions compared, want %d", path, n, nGot)
		}
		checkReadelf(t, out2, relTypes[arch][0])
		files++
	}
	if files == 0 || compared == 0 {
		t.Fatalf("compared %d functions in %d files", compared, files)
	}
	t.Logf("%d objects converted; %d functions identical to binutils 2.47's v3 dump", files, compared)
}

// TestConvertV3ObjectsToV2: functions v2 can express keep their rows;
// the others (flexible FDEs, signal frames) make the conversion fail
// naming them, unless dropped.
func TestConvertV3ObjectsToV2(t *testing.T) {
	dir := t.TempDir()
	dropped := 0
	for _, path := range corpus.ELFs(t) {
		if !strings.HasSuffix(path, ".o") || filepath.Base(filepath.Dir(path)) != "v3" {
			continue
		}
		out := filepath.Join(dir, strings.ReplaceAll(strings.TrimPrefix(path, corpus.Dir(t)), "/", "_"))
		before := mustRead(t, path)
		stdout, stderr, code := runCLI(t, "convert", "--to-version", "2", "-o", out, path)
		if code != 0 {
			if !strings.Contains(stderr, "cannot be expressed in SFRAME_VERSION_2") || !strings.Contains(stderr, "function ") {
				t.Errorf("%s: unexpected failure: %s", path, stderr)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("%s: failed conversion wrote %s", path, out)
			}
			stdout, stderr, code = runCLI(t, "convert", "--drop-unrepresentable", "--to-version", "2", "-o", out, path)
			if code != 0 || !strings.Contains(stderr, "dropped function") {
				t.Fatalf("%s: --drop-unrepresentable: %d %s", path, code, stderr)
			}
			dropped += strings.Count(stderr, "dropped function")
		}
		if !bytes.Equal(before, mustRead(t, path)) {
			t.Fatalf("input %s modified", path)
		}
		_ = stdout
		gotBlocks, n := dumpBlocks(dumpOf(t, out))
		wantBlocks, _ := dumpBlocks(string(mustRead(t, path+".sframe.txt")))
		if c := compareBlocks(t, out+" vs "+path, gotBlocks, asV2(wantBlocks)); c != n {
			t.Errorf("%s: %d of %d functions found in the original dump", path, c, n)
		}
	}
	if dropped == 0 {
		t.Errorf("no v3 object needed dropping; expected the flexible FDEs of the edge/drap objects")
	}
}

// TestConvertS390XRoundTrip converts every s390x v3 corpus file to v2
// and back: the flexible FDEs that save the FP or RA in a register
// (r17+0) convert to v2's register encoding (they were refused), and the
// v3 file made from the v2 one dumps as objdump 2.47 dumped the
// original, byte for byte.
func TestConvertS390XRoundTrip(t *testing.T) {
	files, flex := 0, 0
	for _, path := range corpus.ELFs(t) {
		if !strings.HasSuffix(filepath.Dir(path), "s390x/v3") {
			continue
		}
		files++
		want := string(mustRead(t, path+".sframe.txt"))
		if strings.Contains(want, `attr = "F"`) && flexRegSave.MatchString(want) {
			flex++
		}
		dir := t.TempDir()
		v2 := filepath.Join(dir, "v2")
		if _, errs, code := runCLI(t, "convert", "--to-version", "2", "-o", v2, path); code != 0 {
			t.Errorf("%s to v2: exit %d: %s", path, code, errs)
			continue
		}
		if d := dumpOf(t, v2); !strings.Contains(d, "Version: SFRAME_VERSION_2") || strings.Contains(d, `attr = "F"`) {
			t.Errorf("%s: the v2 file dumps as\n%s", path, d)
		}
		// The name the reference dump shows, in a directory of its own.
		v3 := filepath.Join(dir, filepath.Base(path))
		if _, errs, code := runCLI(t, "convert", "--to-version", "3", "-o", v3, v2); code != 0 {
			t.Errorf("%s back to v3: exit %d: %s", path, code, errs)
			continue
		}
		wd, _ := os.Getwd()
		os.Chdir(dir)
		got := dumpOf(t, filepath.Base(path))
		os.Chdir(wd)
		if got != want {
			t.Errorf("%s: v3 -> v2 -> v3 dumps otherwise than objdump dumped the original:\n%s", path, corpus.FirstDiff(got, want))
		}
	}
	if files == 0 || flex == 0 {
		t.Errorf("%d s390x v3 files, %d with flexible register saves: the test tests nothing", files, flex)
	}
}

// TestConvertLinked: a linked v3 file converts to v2 in place (it
// shrinks); v2 to v3 grows, so the section goes to a new loadable
// segment, with a note on stderr; either way the functions are those of
// the reference dump and the other sections stay where they were.
func TestConvertLinked(t *testing.T) {
	dir := t.TempDir()
	ok, moved := 0, 0
	for _, path := range corpus.ELFs(t) {
		if strings.HasSuffix(path, ".o") {
			continue
		}
		ver := filepath.Base(filepath.Dir(path))
		out := filepath.Join(dir, strings.ReplaceAll(strings.TrimPrefix(path, corpus.Dir(t)), "/", "_"))
		switch ver {
		case "v3":
			_, stderr, code := runCLI(t, "convert", "--drop-unrepresentable", "--to-version", "2", "-o", out, path)
			if code != 0 {
				t.Errorf("%s: %s", path, stderr)
				continue
			}
			gotBlocks, n := dumpBlocks(dumpOf(t, out))
			wantBlocks, _ := dumpBlocks(string(mustRead(t, path+".sframe.txt")))
			if c := compareBlocks(t, out+" vs "+path, gotBlocks, asV2(wantBlocks)); c != n || n == 0 {
				t.Errorf("%s: %d of %d functions match", path, c, n)
			}
			// Only .sframe changed; the program still has the same
			// section layout.
			a, _ := elf.Open(path)
			b, _ := elf.Open(out)
			if len(a.Sections) != len(b.Sections) {
				t.Errorf("%s: section count changed", path)
			}
			for i := range a.Sections {
				if a.Sections[i].Name != ".sframe" && (a.Sections[i].Offset != b.Sections[i].Offset || a.Sections[i].Size != b.Sections[i].Size) {
					t.Errorf("%s: section %s moved", path, a.Sections[i].Name)
				}
			}
			a.Close()
			b.Close()
			ok++
		case "v2":
			_, stderr, code := runCLI(t, "convert", "--to-version", "3", "-o", out, path)
			if code != 0 || !strings.Contains(stderr, "it goes to a new loadable segment at") {
				t.Errorf("%s: v2 -> v3 of a linked file: status %d, %s", path, code, stderr)
				continue
			}
			gotBlocks, n := dumpBlocks(dumpOf(t, out))
			wantBlocks, _ := dumpBlocks(string(mustRead(t, path+".sframe.txt")))
			if c := compareBlocks(t, out+" vs "+path, gotBlocks, asV2(wantBlocks)); c != n || n == 0 {
				t.Errorf("%s: %d of %d functions match", path, c, n)
			}
			a, _ := elf.Open(path)
			b, _ := elf.Open(out)
			for i := range a.Sections {
				if n := a.Sections[i].Name; n != ".sframe" && n != ".shstrtab" && (a.Sections[i].Offset != b.Sections[i].Offset || a.Sections[i].Size != b.Sections[i].Size) &&
					(!mayMove(a.Sections[i]) || a.Sections[i].Size != b.Sections[i].Size) {
					t.Errorf("%s: section %s moved", path, n)
				}
			}
			a.Close()
			b.Close()
			moved++
		}
	}
	if ok == 0 || moved == 0 {
		t.Fatalf("converted %d in place, %d to a new segment", ok, moved)
	}
}

// mayMove reports whether a new loadable segment may take section s out
// of the program header table's way: the program interpreter's name,
// notes, and what the loader finds through the dynamic section (the
// dynamic symbols, their names, hash tables and versions).
func mayMove(s *elf.Section) bool {
	switch s.Type {
	case elf.SHT_NOTE, elf.SHT_DYNSYM, elf.SHT_HASH, elf.SHT_GNU_HASH, elf.SHT_GNU_VERSYM, elf.SHT_GNU_VERNEED, elf.SHT_GNU_VERDEF:
		return true
	case elf.SHT_STRTAB:
		return s.Flags&elf.SHF_ALLOC != 0
	}
	return s.Name == ".interp"
}

// TestConvertRaw converts a bare section (taken from an executable) and
// checks the dump at the same base address.
func TestConvertRaw(t *testing.T) {
	path := filepath.Join(corpus.Dir(t), "x86_64", "v2", "basic-O2.elf")
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	sec := elffile.FindSFrame(f, "")
	data, _ := sec.Data()
	f.Close()
	dir := t.TempDir()
	in := filepath.Join(dir, "in.sframe")
	if err := os.WriteFile(in, data, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.sframe")
	base := "0x" + strconvHex(sec.Addr)
	convertOK(t, "--raw", "--base", base, "--to-version", "3", "--output", out, in)
	gotBlocks, n := dumpBlocks(dumpOf(t, "--raw", "--base", base, out))
	wantBlocks, _ := dumpBlocks(string(mustRead(t, path+".sframe.txt")))
	if c := compareBlocks(t, "raw", gotBlocks, wantBlocks); c != n || n == 0 {
		t.Errorf("%d of %d functions match", c, n)
	}
	s, err := sframe.Parse(mustRead(t, out), sec.Addr)
	if err != nil || s.Header().Version != sframe.Version3 || s.Header().Flags != sframe.FlagFDESorted|sframe.FlagFuncStartPCRel {
		t.Fatalf("converted raw section: %v %+v", err, s)
	}
}

func strconvHex(v uint64) string {
	const digits = "0123456789abcdef"
	if v == 0 {
		return "0"
	}
	var b []byte
	for ; v > 0; v >>= 4 {
		b = append([]byte{digits[v&15]}, b...)
	}
	return string(b)
}

// TestConvertUsage covers argument errors.
func TestConvertUsage(t *testing.T) {
	path := filepath.Join(corpus.Dir(t), "x86_64", "v2", "basic-O2.o")
	for _, args := range [][]string{
		{"convert", path},
		{"convert", "--to-version", "4", "-o", "x", path},
		{"convert", "--to-version", "3", path},
		{"convert", "--to-version", "3", "-o", path, path},
	} {
		if _, _, code := runCLI(t, args...); code != 2 {
			t.Errorf("%v: status %d, want 2", args, code)
		}
	}
	if _, _, code := runCLI(t, "convert", "-h"); code != 0 {
		t.Errorf("-h: status %d", code)
	}
	dir := t.TempDir()
	// Flags after the file, as for dump.
	out := filepath.Join(dir, "x.o")
	if _, stderr, code := runCLI(t, "convert", path, "-o", out, "--to-version", "3"); code != 0 {
		t.Errorf("flags after the file: %s", stderr)
	}
}

// TestConvertLinkedV1 converts what this machine's gcc -Wa,--gsframe
// links (binutils 2.40 writes SFrame v1) to v2 and v3: the new section
// does not fit in the old one's place, so it goes to a new loadable
// segment, which convert notes on stderr. The results run as the
// originals do, dump and verify accept them, and strip, objcopy
// --only-keep-debug and eu-elflint say nothing of them they do not say
// of the input (but elflint not knowing the SFrame types); the stripped
// copies run too. Inputs: a PIE, a non-PIE executable and a library.
func TestConvertLinkedV1(t *testing.T) {
	for _, tool := range []string{"gcc", "strip", "objcopy", "eu-elflint"} {
		testprog.NeedTool(t, tool)
	}
	dir := t.TempDir()
	prog, lib := filepath.Join(dir, "prog.c"), filepath.Join(dir, "lib.c")
	os.WriteFile(prog, []byte(genProg), 0o644)
	os.WriteFile(lib, []byte(genLib), 0o644)
	build := func(out string, args ...string) string {
		p := filepath.Join(dir, out)
		if o, e, rc := runCmd(t, nil, "gcc", append(append([]string{"-Wa,--gsframe"}, args...), "-o", p)...); rc != 0 {
			t.Fatalf("gcc %v: %s%s", args, o, e)
		}
		return p
	}
	libdir := filepath.Join(dir, "lib")
	os.Mkdir(libdir, 0o755)
	libso := build("lib/libwork.so", "-O2", "-shared", "-fPIC", lib)
	inputs := []string{
		build("pie", "-O2", "-fpie", "-pie", prog),
		build("nopie", "-O2", "-fno-pie", "-no-pie", prog),
		build("withlib", "-O2", "-DWITH_LIB", prog, "-L"+libdir, "-lwork"),
		libso,
	}
	for _, in := range inputs {
		f, err := elf.Open(in)
		if err != nil {
			t.Fatal(err)
		}
		sec := elffile.FindSFrame(f, "")
		if sec == nil {
			t.Fatalf("%s: gcc -Wa,--gsframe made no .sframe", in)
		}
		data, _ := sec.Data()
		f.Close()
		if s, err := sframe.Parse(data, sec.Addr); err != nil || s.Header().Version != sframe.Version1 {
			t.Logf("%s: the linked .sframe is not v1 (%v): testing its conversion all the same", in, err)
		}
		for _, v := range []string{"2", "3"} {
			name := filepath.Base(in) + ".v" + v
			t.Run(name, func(t *testing.T) {
				sub := filepath.Join(dir, name)
				os.Mkdir(sub, 0o755)
				out := filepath.Join(sub, filepath.Base(in))
				_, errs, rc := runCLI(t, "convert", "--to-version", v, "-o", out, in)
				if rc != 0 || !strings.Contains(errs, "note: "+in+": the SFRAME_VERSION_"+v+" section does not fit in the place of the old one; it goes to a new loadable segment at ") {
					t.Fatalf("convert: exit %d, stderr %q", rc, errs)
				}
				checkLoadable(t, out, sframe.Version(v[0]-'0')) // verify and readelf among the checks
				if _, errs, rc := runCLI(t, "dump", out); rc != 0 {
					t.Errorf("sframe dump: exit %d: %s", rc, errs)
				}
				for _, c := range []struct {
					tool string
					args func(in, out string) []string
				}{
					{"strip", func(in, out string) []string { return []string{"-o", out, in} }},
					{"objcopy", func(in, out string) []string { return []string{"--only-keep-debug", in, out} }},
					{"eu-elflint", func(in, out string) []string { return []string{"--gnu-ld", in} }},
				} {
					was := toolWarnings(t, c.tool, c.args(in, filepath.Join(sub, "in."+c.tool))...)
					got := toolWarnings(t, c.tool, c.args(out, filepath.Join(sub, "out."+c.tool))...)
					if nw := newWarnings(got, was); len(nw) > 0 {
						t.Errorf("%s on the output of convert: %q (on the input: %q)", c.tool, nw, was)
					}
				}
				stripped := filepath.Join(sub, "out.strip")
				checkLoadable(t, stripped, sframe.Version(v[0]-'0'))
				if strings.HasSuffix(in, ".so") {
					checkLoadedPhdrs(t, out)
					checkLoadedPhdrs(t, stripped)
					return
				}
				os.Chmod(stripped, 0o755)
				env := []string{"LD_LIBRARY_PATH=" + libdir}
				o1, e1, rc1 := runCmd(t, env, in, "12")
				for _, exe := range []string{out, stripped} {
					o2, e2, rc2 := runCmd(t, env, exe, "12")
					if o1 != o2 || e1 != e2 || rc1 != rc2 {
						t.Errorf("%s: (%d) %q %q, original (%d) %q %q", exe, rc2, o2, e2, rc1, o1, e1)
					}
				}
			})
		}
	}
}
