package symbolize

import (
	"bytes"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ianlancetaylor/demangle"

	"github.com/sframekit/sframekit/internal/testprog"
)

// TestDemangleMatchesCxxfilt demangles every C++ symbol of the installed
// libstdc++ and compares with binutils' c++filt.
func TestDemangleMatchesCxxfilt(t *testing.T) {
	testprog.NeedTool(t, "c++filt")
	lib, names := libstdcxxNames(t)
	names = append(names, "main", "pause", "_start", "__libc_start_main")
	cmd := exec.Command("c++filt")
	cmd.Stdin = strings.NewReader(strings.Join(names, "\n") + "\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Split(strings.TrimSuffix(string(bytes.TrimRight(out, "\n")), "\n"), "\n")
	if len(want) != len(names) {
		t.Fatalf("c++filt printed %d lines for %d names", len(want), len(names))
	}
	bad := 0
	for i, n := range names {
		if got := Demangle(n); got != want[i] {
			bad++
			if bad <= 10 {
				t.Errorf("%s:\n got  %s\n want %s", n, got, want[i])
			}
		}
	}
	t.Logf("%d names from %s, %d differ", len(names), lib, bad)
}

// libstdcxxNames returns the path of the installed libstdc++ and the
// C++ names of its dynamic symbols, skipping the test without one.
func libstdcxxNames(t testing.TB) (string, []string) {
	t.Helper()
	var lib string
	for _, p := range []string{"/usr/lib/x86_64-linux-gnu/libstdc++.so.6", "/lib/x86_64-linux-gnu/libstdc++.so.6", "/usr/lib64/libstdc++.so.6"} {
		if _, err := os.Stat(p); err == nil {
			lib = p
			break
		}
	}
	if lib == "" {
		t.Skip("no libstdc++.so.6 found")
	}
	f, err := elf.Open(lib)
	if err != nil {
		t.Fatal(err)
	}
	syms, err := f.DynamicSymbols()
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range syms {
		if strings.HasPrefix(s.Name, "_Z") {
			names = append(names, s.Name)
		}
	}
	return lib, names
}

// BenchmarkDemangle demangles every C++ name of libstdc++ (about 5,000),
// in both forms: the cost of naming a file's functions.
func BenchmarkDemangle(b *testing.B) {
	_, names := libstdcxxNames(b)
	for _, c := range []struct {
		name string
		fn   func(string) string
	}{{"full", Demangle}, {"short", DemangleShort}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				for _, n := range names {
					_ = c.fn(n)
				}
			}
		})
	}
}

// TestDemangleEmptyPacksMatchCxxfilt: empty template argument packs
// print as libiberty prints them, in c++filt's form (Demangle) and
// without parameters (DemangleShort, perf's form; c++filt -p, the same
// for these names): ", " left where an argument follows, and no space
// between two closing brackets after a last empty pack, as in
// libLLVM's llvm::PassManager<llvm::Module,
// llvm::AnalysisManager<llvm::Module>>::run.
func TestDemangleEmptyPacksMatchCxxfilt(t *testing.T) {
	testprog.NeedTool(t, "c++filt")
	names := []string{
		"_ZN4llvm11PassManagerINS_6ModuleENS_15AnalysisManagerIS1_JEEEJEE3runERS1_RS3_",
		"_ZN3FooIS_IiEJEE3barEv",   // Foo<Foo<int>>::bar()
		"_ZN3FooIS_IiEJEEC2Ev",     // a constructor
		"_ZN3FooIS_IiEE3barEv",     // no pack: Foo<Foo<int> >::bar()
		"_ZN3FooIJEiE3barEv",       // Foo<, int>::bar()
		"_ZN3FooIJEE3barEv",        // Foo<>::bar()
		"_ZN3FooIiJEE3barEv",       // Foo<int>::bar()
		"_ZN3FooIS_IiEJEiE3barEv",  // Foo<Foo<int>, , int>::bar()
		"_ZN3FooIS_IiEJEJEE3barEv", // two empty packs at the end
		"_Z1fIJEEviDpT_i",          // void f<>(int, , int)
		"_Z1fIJEEvDpT_i",           // void f<>(, int)
		"_Z1fIiJEEvT_DpT0_",        // void f<int>(int)
		"_ZSt11make_uniqueI3FooJEENSt9_MakeUniqIT_E15__single_objectEDpOT0_",
		"_ZN3FooIS_IiEJEE3barEv.cold", // a clone
	}
	matchCxxfilt(t, names)
}

// matchCxxfilt checks that Demangle gives c++filt's form of each name,
// and DemangleShort c++filt -p's (perf's, for names whose own path
// holds no std:: abbreviation, which c++filt expands).
func matchCxxfilt(t *testing.T, names []string) {
	t.Helper()
	for _, p := range []bool{false, true} {
		args := []string{}
		if p {
			args = append(args, "-p")
		}
		cmd := exec.Command("c++filt", args...)
		cmd.Stdin = strings.NewReader(strings.Join(names, "\n") + "\n")
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		want := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
		if len(want) != len(names) {
			t.Fatalf("c++filt printed %d lines for %d names", len(want), len(names))
		}
		for i, n := range names {
			got := Demangle(n)
			if p {
				got = DemangleShort(n)
			}
			if got != want[i] {
				t.Errorf("%s (short %v):\n got  %s\n want %s", n, p, got, want[i])
			}
		}
	}
}

// TestDemangleFunctionAddressMatchesCxxfilt: the address of a function
// as a template argument prints as libiberty prints it: the function's
// name alone when that is a qualified name (&A::g), else the whole
// function in parentheses, with its type (&(void g<int>(int))), where
// demangle left the type out for every name. libclang-cpp's AST
// matchers name their functions so (about 200 of its symbols).
func TestDemangleFunctionAddressMatchesCxxfilt(t *testing.T) {
	testprog.NeedTool(t, "c++filt")
	matchCxxfilt(t, []string{
		// libclang-cpp.so.14
		"_ZN5clang12ast_matchers7dynamic8internal25variadicMatcherDescriptorINS0_8internal15BindableMatcherINS_12TemplateNameEEENS4_7MatcherIS6_EEXadL_ZNS4_18makeAllOfCompositeIS6_EENS5_IT_EEN4llvm8ArrayRefIPKNS8_ISB_EEEEEEEENS1_14VariantMatcherENSD_9StringRefENS1_11SourceRangeENSE_INS1_11ParserValueEEEPNS1_11DiagnosticsE",
		"_ZN5clang12ast_matchers7dynamic8internal25variadicMatcherDescriptorINS0_8internal15BindableMatcherINS_4DeclEEENS4_7MatcherINS_10FriendDeclEEEXadL_ZNS4_25makeDynCastAllOfCompositeIS6_S9_EENS5_IT_EEN4llvm8ArrayRefIPKNS8_IT0_EEEEEEEENS1_14VariantMatcherENSE_9StringRefENS1_11SourceRangeENSF_INS1_11ParserValueEEEPNS1_11DiagnosticsE",
		"_ZN5clang25LazyGenerationalUpdatePtrIPKNS_4DeclEPS1_XadL_ZNS_17ExternalASTSource19CompleteRedeclChainES3_EEE9makeValueERKNS_10ASTContextES4_",
		"_ZZN5clang12ast_matchers8internal15MemoizedMatcherINS1_7MatcherINS_4DeclEEEXadL_ZNS0_26isInstantiated_getInstanceEvEEE11getInstanceEvE8Instance",
		"_Z1fIXadL_Z1gIiEvT_EEEvv",     // void f<&(void g<int>(int))>()
		"_Z1fIXadLZ1gIiEvT_EEEvv",      // the same as g++ wrote it before -fabi-version=3
		"_Z1fIXadL_Z1gvEEEvv",          // void f<&(g())>()
		"_Z1fIXadL_ZN1A1gEvEEEvv",      // void f<&A::g>()
		"_Z1fIXadL_ZN1A1gIiEEvvEEEvv",  // void f<&(void A::g<int>())>()
		"_Z1fIXadL_ZNK1A1gIiEEvvEEEvv", // a const member function
		"_Z1fIXadL_ZZ1hvEN1A1gEvEEEvv", // a local name: void f<&(h()::A::g())>()
		"_Z1fIXadL_ZN1A1xEEEEvv",       // the address of a variable: void f<&A::x>()
		"_Z1fIL_Z1gIiEvT_EEvv",         // a function, no address: void f<void g<int>(int)>()
		"_Z1fIXadL_Z1gIiEvT_EEJEEvv",   // with an empty pack after it
	})
}

// TestDemangleUnresolvedTemplatesMatchCxxfilt: an operand that names a
// template's specialization in a scope, as an unresolved name, prints
// in parentheses as libiberty prints it: libLLVM's
// decltype (std::begin((std::declval<llvm::BasicBlock&>)())), where
// demangle printed std::declval<llvm::BasicBlock&>().
func TestDemangleUnresolvedTemplatesMatchCxxfilt(t *testing.T) {
	testprog.NeedTool(t, "c++filt")
	matchCxxfilt(t, []string{
		// libLLVM-15.so.1
		"_ZN4llvm17make_filter_rangeIRKNS_10BasicBlockESt8functionIFbRKNS_11InstructionEEEEENS_14iterator_rangeINS_20filter_iterator_implIDTclsr3stdE5beginclsr3stdE7declvalIRT_EEEET0_NS_6detail15fwd_or_bidi_tagISE_E4typeEEEEEOSC_SF_",
		"_ZN4llvm17make_filter_rangeIRNS_10BasicBlockESt8functionIFbRNS_11InstructionEEEEENS_14iterator_rangeINS_20filter_iterator_implIDTclsr3stdE5beginclsr3stdE7declvalIRT_EEEET0_NS_6detail15fwd_or_bidi_tagISC_E4typeEEEEEOSA_SD_",
		"_Z1fIiEDTclsr1AE1gIT_EEEv",      // decltype ((A::g<int>)()) f<int>()
		"_Z1fIiEDTclsr1AE1gEEv",          // no template: decltype (A::g()) f<int>()
		"_Z1fIiEDTplsr1AE1gIT_ELi1EEv",   // decltype ((A::g<int>)+(1)) f<int>()
		"_Z1fIiEDTplLi1Esr1AE1gIT_EEv",   // the right operand
		"_Z1fIiEDTngsr1AE1gIT_EEv",       // decltype (-(A::g<int>)) f<int>()
		"_Z1fIiEDTpp_sr1AE1gIT_EEv",      // prefix ++
		"_Z1fIiEDTppsr1AE1gIT_EEv",       // postfix ++
		"_Z1fIiEDTadsr1AE1gIT_EEv",       // decltype (&(A::g<int>)) f<int>()
		"_Z1fIiEDTszsr1AE1gIT_EEv",       // sizeof: its own parentheses only
		"_Z1fIiEDTgssr1AE1gIT_EEv",       // after ::, none
		"_Z1fIiEDTcldtfp_sr1AE1gIT_EEEv", // decltype (({parm#1}.(A::g<int>))()) f<int>()
	})
}

// TestDemangleUnnamedStructorsMatchCxxfilt: the constructor or
// destructor of an unnamed type or closure is named as libiberty names
// it, after the name of the scope around it: ICU's
// icu_72::number::impl::MicroProps::{unnamed type#1}::~MicroProps,
// where demangle printed ~{unnamed type#1}.
func TestDemangleUnnamedStructorsMatchCxxfilt(t *testing.T) {
	testprog.NeedTool(t, "c++filt")
	matchCxxfilt(t, []string{
		// libicui18n.so.72
		"_ZN6icu_726number4impl10MicroPropsUt_D1Ev",
		"_ZN6icu_726number4impl10MicroPropsUt_D2Ev",
		"_ZN6icu_728numparse4impl16NumberParserImplUt_C1Ev",
		"_ZN6icu_728numparse4impl16NumberParserImplUt_C2Ev",
		"_ZN1AUt_C1Ev",            // A::{unnamed type#1}::A()
		"_ZN1AUlvE_C2Ev",          // A::{lambda()#1}::A()
		"_ZN1AIiEUt_C1Ev",         // A<int>::{unnamed type#1}::A()
		"_ZN1BIN1AEEUt_C1Ev",      // the template's name, not its argument's
		"_ZN1A1BUt_Ut0_C1Ev",      // A::B::{unnamed type#1}::{unnamed type#2}::B()
		"_ZNSt1AUt_C1Ev",          // std::A::{unnamed type#1}::A()
		"_ZN1A1BUt_C1ERKS1_",      // a copy constructor
		"_ZZ1fvEN1AUt_C1Ev",       // in a local name
		"_ZNK1AUt_D1Ev",           // const
		"_ZN1AUt_C1IiEET_",        // a template constructor
		"_ZN1AUt_C1Ev.cold",       // a clone
		"_ZN3FooIS_IiEJEEUt_C1Ev", // with an empty pack
	})
}

// TestDemangleBounded: a name that expands far beyond its size (each of
// 8,000 parameters is a two-byte substitution for a 30-character class
// name) comes back as it is rather than as a quarter megabyte of text.
func TestDemangleBounded(t *testing.T) {
	const class = "AVeryLongClassNameForTheTestXY" // 30 bytes
	name := "_Z1f30" + class + strings.Repeat("S_", 8000)
	if full := demangle.Filter(name, demangle.Verbose); len(full) < 200_000 {
		t.Fatalf("the test name expands to only %d bytes", len(full))
	}
	if got := Demangle(name); got != name {
		t.Errorf("demangled to %d bytes", len(got))
	}
	if got := Demangle("_Z4deepi"); got != "deep(int)" {
		t.Errorf("Demangle(_Z4deepi) = %q", got)
	}
}

// rustc returns the Rust compiler: on PATH, or rustup's default place. It
// skips the test when there is none, and fails it under CI. (The test
// needs rustc 1.59 or later, for -C symbol-mangling-version=v0;
// Debian 12's 1.63 does.)
func rustc(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("rustc"); err == nil {
		return p
	}
	if home, err := os.UserHomeDir(); err == nil {
		p := filepath.Join(home, ".cargo", "bin", "rustc")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("rustc not found; required under CI")
	}
	t.Skip("rustc not found")
	return ""
}

// cxxfilt demangles names with c++filt, each given as an argument (on
// its standard input c++filt would split names at characters such as
// '@').
func cxxfilt(t *testing.T, names []string) []string {
	t.Helper()
	var out []string
	for len(names) > 0 {
		n := min(len(names), 500)
		b, err := exec.Command("c++filt", names[:n]...).Output()
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
		if len(lines) != n {
			t.Fatalf("c++filt printed %d lines for %d names", len(lines), n)
		}
		out = append(out, lines...)
		names = names[n:]
	}
	return out
}

// TestDemangleRustMatchesCxxfilt builds a Rust program with legacy and
// with v0 symbol names and demangles every Rust symbol of both (the
// program's and the standard library's, a few thousand) as c++filt
// does: legacy names with their hash, v0 names with crate
// disambiguators, closures, shims, trait objects, function pointers,
// constants and a Punycode identifier.
func TestDemangleRustMatchesCxxfilt(t *testing.T) {
	testprog.NeedTool(t, "c++filt")
	rc := rustc(t)
	dir := t.TempDir()
	for _, c := range []struct {
		name  string
		flags []string
		must  []string // in c++filt's output
	}{
		{"legacy", nil, []string{
			"::__rust_begin_short_backtrace::h",
			"<rustprog::Square as rustprog::Shape>::area::h",
		}},
		{"v0", []string{"-C", "symbol-mangling-version=v0"}, []string{
			"]::größe",
			"::with_const::<3: usize, true: bool, 'x': char, -4: i32>",
			`::takes_fn::<extern "C" fn(i32) -> i32>`,
			"::takes_fn::<for<'a> fn(&'a u8) -> u8>",
			"::takes_fn::<unsafe fn(u32) -> u32>",
			"::call_dyn",
			"dyn core[",
			"{closure#0}",
			"{shim:vtable#0}",
			"::Wrap<u16, 3: usize>>::first",
		}},
	} {
		exe := filepath.Join(dir, c.name)
		args := append([]string{"-O", "-o", exe}, c.flags...)
		if out, err := exec.Command(rc, append(args, "testdata/rustprog.rs")...).CombinedOutput(); err != nil {
			t.Fatalf("rustc %v: %v\n%s", args, err, out)
		}
		f, err := elf.Open(exe)
		if err != nil {
			t.Fatal(err)
		}
		syms, err := f.Symbols()
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		seen := map[string]bool{}
		for _, s := range syms {
			if (strings.HasPrefix(s.Name, "_ZN") || strings.HasPrefix(s.Name, "_R")) && !seen[s.Name] {
				seen[s.Name] = true
				names = append(names, s.Name)
			}
		}
		want := cxxfilt(t, names)
		bad, rust := 0, 0
		for i, n := range names {
			if want[i] != n {
				rust++
			}
			if got := Demangle(n); got != want[i] {
				if bad++; bad <= 10 {
					t.Errorf("%s: %s:\n got  %s\n want %s", c.name, n, got, want[i])
				}
			}
			// perf's form of a legacy name: libiberty's without its
			// verbose option, c++filt's without the hash
			// (__rust_begin_short_backtrace keeps both underscores).
			if h := legacyHash.FindStringIndex(want[i]); h != nil && strings.HasPrefix(n, "_ZN") {
				if got := DemangleShort(n); got != want[i][:h[0]] {
					if bad++; bad <= 10 {
						t.Errorf("%s: %s: DemangleShort:\n got  %s\n want %s", c.name, n, got, want[i][:h[0]])
					}
				}
			}
		}
		t.Logf("%s: %d names, %d demangled by c++filt, %d differ", c.name, len(names), rust, bad)
		if rust < 500 {
			t.Errorf("%s: only %d names to compare", c.name, rust)
		}
		all := strings.Join(want, "\n")
		for _, m := range c.must {
			if !strings.Contains(all, m) {
				t.Errorf("%s: no %q among c++filt's names", c.name, m)
			}
		}
	}
}

// legacyHash is the hash c++filt prints last in a legacy Rust name.
var legacyHash = regexp.MustCompile(`::h[0-9a-f]{16}$`)

// TestDemangleRustCrafted: malformed and hostile v0 names come back as
// they are, quickly: deep nesting, a back reference to itself or ahead,
// a binder of 2^60 lifetimes, an expansion past the output bound.
func TestDemangleRustCrafted(t *testing.T) {
	expand := "_RINvC1a1bT" // a tuple of back references to the tuple before
	for i := 0; i < 40; i++ {
		expand += "TB6_B6_E"
	}
	for _, name := range []string{
		"_R" + strings.Repeat("NvNv", 2000) + "C1a",
		"_RB_",
		"_RB0_",
		"_RNvB5_1a",
		"_RINvC1a1bFGzzzzzzzzzz_EuEE",
		"_RINvC1a1bFGzzzzzzzzzz_EuEEC1c", // the same in the skipped crate
		"_RNvC1au3abc_",
		"_RNvC1a9999999999999999999999",
		expand,
	} {
		if got := Demangle(name); got != name {
			t.Errorf("%.60s: demangled to %.80q", name, got)
		}
	}
	// Well-formed names of each kind, checked by c++filt by hand.
	for name, want := range map[string]string{
		"_RNvC7mycrate3foo":                             "mycrate[0]::foo",
		"_RNvCs1234_7mycrate3foo.llvm.123":              "mycrate[3c1c0]::foo",
		"_ZN3foo3a.b17h0123456789abcdefE":               "foo::a.b::h0123456789abcdef",
		"_ZN3foo3bar17h0123456789abcdefE.llvm.1234":     "foo::bar::h0123456789abcdef",
		"_ZN3std2rt10lang_start17h0123456789abcdefE":    "std::rt::lang_start::h0123456789abcdef",
		"_ZN3std2rt10lang_start17h0000000000000000E":    "std::rt::lang_start::h0000000000000000", // not a hash: C++
		"_ZN4core3fmt11write$u20$x17h0123456789abcdefE": "core::fmt::write x::h0123456789abcdef",
	} {
		if got := Demangle(name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
}

// FuzzDemangle: no name may panic, loop or demangle past the bound.
func FuzzDemangle(f *testing.F) {
	for _, s := range []string{"_RNvC7mycrate3foo", "_RINvCslJxvM8I8iJi_8rustprog10with_constKj3_Kb1_Kc78_Kln4_EB2_",
		"_RINvCslJxvM8I8iJi_8rustprog8takes_fnFG_RL0_hEhEB2_", "_RNvXs3_NtNtCsgEmfK2I1SDS_4core4hash3sipINtB5_6HasherNtB5_11Sip13RoundsENtB7_6Hasher5writeCs56HGsqMBDvY_4prog",
		"_ZN3std2rt10lang_start17h0123456789abcdefE", "_ZN8rustprog13gr$uf6$$udf$e17h35eaf6bd87099d4cE", "_Z4deepi",
		"_ZN4llvm11PassManagerINS_6ModuleENS_15AnalysisManagerIS1_JEEEJEE3runERS1_RS3_", "_ZN3FooIJEiE3barEv",
		"_Z1fIXadL_Z1gIiEvT_EEEvv", "_ZN1A1BUt_Ut0_C1Ev", "_ZN1AUlvE_C2Ev", "_Z1fIiEDTcldtfp_sr1AE1gIT_EEEv"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if d := Demangle(name); len(d) >= 1<<maxDemangledPow && d != name {
			t.Errorf("%d bytes", len(d))
		}
		if d := DemangleShort(name); len(d) >= 1<<maxDemangledPow && d != name {
			t.Errorf("short: %d bytes", len(d))
		}
	})
}
