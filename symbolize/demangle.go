package symbolize

import (
	"strconv"
	"strings"

	"github.com/ianlancetaylor/demangle"
)

// maxDemangledPow bounds demangled names to 1<<maxDemangledPow bytes.
// Symbol tables come from the programs being looked at: a crafted name
// can expand far beyond its size (C++ substitutions and Rust back
// references multiply it), and a cut name is worse than the symbol.
const maxDemangledPow = 16

// Demangle returns the source-level form of a C++ (Itanium ABI) or Rust
// symbol name as c++filt prints it, or name itself when it is not a
// mangled name, does not demangle, or would demangle to more than 64 KB.
//
// Rust names are demangled as c++filt (and gdb) do, in their verbose
// form: a legacy name keeps its hash as a last path element
// (std::rt::lang_start::h0123456789abcdef), and a v0 name shows each
// crate's disambiguator (std[8b1e3a5c2d4f6e7a]::rt::lang_start::<()>) and
// the type of each constant generic argument. As in c++filt, a name
// starting with _ZN is tried as a legacy Rust name first, then as C++.
func Demangle(name string) string {
	if len(name) < 2 || name[0] != '_' || (name[1] != 'Z' && name[1] != 'R') {
		return name // the common case, C names, without the checks below
	}
	if d, ok := demangleRust(name, 1<<maxDemangledPow); ok {
		return d
	}
	if name[1] == 'R' {
		return name // not a valid Rust v0 name, and not C++ either
	}
	if d := filterCxx(name, demangle.Verbose, demangle.NoRust, demangle.MaxLength(maxDemangledPow)); len(d) < 1<<maxDemangledPow {
		return d
	}
	return name
}

// DemangleShort returns a C++ or Rust name as perf shows it, without
// parameters and without c++filt's verbose expansions (std::string
// rather than std::basic_string<...>), or name itself when it does not
// demangle or would demangle to more than 64 KB.
func DemangleShort(name string) string {
	if len(name) < 2 || name[0] != '_' || (name[1] != 'Z' && name[1] != 'R') {
		return name
	}
	// A legacy Rust name as libiberty prints it without its verbose
	// option: without the hash. (demangle's own takes a '_' that starts
	// an element for a separator: std::sys::backtrace::_rust_begin_short_backtrace
	// for __rust_begin_short_backtrace.)
	if strings.HasPrefix(name, "_ZN") {
		if d, ok := demangleRust(name, 1<<maxDemangledPow); ok {
			const hash = len("::h0123456789abcdef")
			if len(d) > hash && d[len(d)-hash:len(d)-hash+3] == "::h" {
				return d[:len(d)-hash]
			}
			return name
		}
	}
	if d := filterCxx(name, demangle.NoParams, demangle.MaxLength(maxDemangledPow)); len(d) < 1<<maxDemangledPow {
		return d
	}
	return name
}

// filterCxx is demangle.Filter, but prints what demangle prints
// otherwise than libiberty (c++filt, perf) as libiberty does, by
// rewriting the tree (libibertyTree) of the names that can hold such
// parts; the others, nearly all, go through demangle.Filter unchanged.
func filterCxx(name string, opts ...demangle.Option) string {
	// An empty pack is "JE" in the mangled name, and a pack expansion
	// prints nothing only when its pack is empty; the address of a
	// function is "ad" before the function's encoding, "L_Z" (or "LZ",
	// as g++ wrote it before -fabi-version=3); an unresolved name is
	// "sr" and its scope; an unnamed type or a closure is "Ut" or "Ul".
	if !(strings.Contains(name, "JE") || strings.Contains(name, "adL") || maybeUnresolvedName(name) || maybeUnnamedStructor(name)) || !strings.HasPrefix(name, "_Z") || legacyRustShape(name) {
		return demangle.Filter(name, opts...)
	}
	a, err := demangle.ToAST(name, opts...)
	if err != nil {
		return name
	}
	a = libibertyTree(a, name)
	return strings.ReplaceAll(demangle.ASTToString(a, opts...), ", "+packMark, "")
}

// packMark stands for an empty argument at the end of a list while
// demangle prints it: demangle writes ", " before it and, since the last
// byte is not '>', no space before the template's '>'; filterCxx then
// removes ", " and the mark, as libiberty takes back its ", ". Symbol
// names hold no NUL byte.
const packMark = "\x00"

// libibertyTree returns a with the nodes that demangle prints otherwise
// than libiberty replaced by nodes that print as libiberty does. The
// tree is copied, not changed: template parameters refer to their
// template's original arguments.
//
// Empty template argument packs: libiberty writes ", " before each
// argument and takes it back when the argument prints nothing, so an
// empty pack first or between arguments leaves ", " behind
// (Foo<, int>, f(int, , int)), and one at the end of a template's
// arguments leaves no space between two closing brackets:
// llvm::PassManager<llvm::Module, llvm::AnalysisManager<llvm::Module>>
// (its third argument an empty pack), where demangle skips empty packs
// and writes "> >" as for Foo<Foo<int> >. Each empty argument becomes
// an empty Name where an argument follows (demangle would skip it),
// packMark at the end.
//
// The address of a function: libiberty leaves out the type of the
// function only when its name is a qualified one (&A::f, most often a
// pointer to member) and prints the whole function otherwise, in
// parentheses: clang's AST matchers take
// &(clang::ast_matchers::internal::BindableMatcher<clang::Decl> clang::ast_matchers::internal::makeDynCastAllOfComposite<clang::Decl, clang::FriendDecl>(llvm::ArrayRef<...>))
// as a template argument, where demangle prints
// &(clang::ast_matchers::internal::makeDynCastAllOfComposite<clang::Decl, clang::FriendDecl>),
// leaving the type out for any name, an operand that is not a Typed
// node whole.
//
// An operand that names a template's specialization in a scope, as an
// unresolved name ("sr"): libiberty makes the specialization of the
// qualified name, where demangle qualifies the specialization, so that
// libiberty prints it in parentheses as it prints all operands but
// names: decltype ((std::declval<llvm::BasicBlock&>)()), where demangle
// printed decltype (std::declval<llvm::BasicBlock&>()).
//
// The constructor or destructor of an unnamed type or a closure:
// libiberty names it after the last source name it read before
// (icu_72::number::impl::MicroProps::{unnamed type#1}::~MicroProps),
// demangle after the type (~{unnamed type#1}). See unnamedStructor.
func libibertyTree(a demangle.AST, mangled string) demangle.AST {
	fn := func(a demangle.AST) demangle.AST {
		switch a := a.(type) {
		case *demangle.Qualified:
			if n := unnamedStructor(a, mangled); n != nil {
				return &demangle.Qualified{Scope: a.Scope, Name: n, LocalName: a.LocalName}
			}
		case *demangle.Template:
			if args, ok := libibertyArgs(a.Args); ok {
				return &demangle.Template{Name: a.Name, Args: args}
			}
		case *demangle.FunctionType:
			if args, ok := libibertyArgs(a.Args); ok {
				return &demangle.FunctionType{Return: a.Return, Args: args, ForLocalName: a.ForLocalName}
			}
		case *demangle.Unary:
			if op, ok := a.Op.(*demangle.Operator); ok && op.Name == "&" && !a.Suffix {
				if t, ok := a.Expr.(*demangle.Typed); ok {
					if _, ok := t.Type.(*demangle.FunctionType); ok {
						if q, ok := t.Name.(*demangle.Qualified); !ok || q.LocalName {
							return &demangle.Unary{Op: a.Op, Expr: parens(t), SizeofType: a.SizeofType}
						}
					}
				}
			}
			if qualifiedTemplate(a.Expr) {
				return &demangle.Unary{Op: a.Op, Expr: parens(a.Expr), Suffix: a.Suffix, SizeofType: a.SizeofType}
			}
		case *demangle.Binary:
			l, r := qualifiedTemplate(a.Left), qualifiedTemplate(a.Right)
			if l || r {
				b := &demangle.Binary{Op: a.Op, Left: a.Left, Right: a.Right}
				if l {
					b.Left = parens(a.Left)
				}
				if r {
					b.Right = parens(a.Right)
				}
				return b
			}
		}
		return nil
	}
	if c := a.Copy(fn, func(demangle.AST) bool { return false }); c != nil {
		return c
	}
	return a
}

// parens returns a node that demangle prints as a, in parentheses where
// a is an operand: a one-element ArgumentPack, which demangle prints as
// its element and, not being a name, puts in parentheses as an operand.
func parens(a demangle.AST) demangle.AST {
	return &demangle.ArgumentPack{Args: []demangle.AST{a}}
}

// qualifiedTemplate reports whether the operand a is a template's
// specialization in a scope (A::g<int>) as demangle reads an unresolved
// name: a qualified name, not a local one, whose last part is the
// specialization.
func qualifiedTemplate(a demangle.AST) bool {
	q, ok := a.(*demangle.Qualified)
	if !ok || q.LocalName {
		return false
	}
	_, ok = q.Name.(*demangle.Template)
	return ok
}

// unnamedStructor returns the constructor or destructor that q names,
// named as libiberty names it, when it is one of an unnamed type or a
// closure (A::{unnamed type#1}::A(), where demangle prints
// {unnamed type#1}()); else nil. libiberty names it after the last
// source name it read (its d_info.last_name; a template's arguments do
// not count), which is the name of the scope around the unnamed types
// when the mangled name holds that name right before them ("1AUt_", or
// "1AI" and the template's arguments). Otherwise, as where the scope
// is a substitution (which sets no last name), q is left as it is.
func unnamedStructor(q *demangle.Qualified, mangled string) demangle.AST {
	var ctorName demangle.AST
	switch n := q.Name.(type) {
	case *demangle.Constructor:
		if n.Base != nil {
			return nil // inheriting: libiberty's last name is the base's
		}
		ctorName = n.Name
	case *demangle.Destructor:
		ctorName = n.Name
	default:
		return nil
	}
	if !unnamedType(ctorName) {
		return nil
	}
	s := q.Scope
	for {
		p, ok := s.(*demangle.Qualified)
		if !ok || !unnamedType(p.Name) {
			break
		}
		s = p.Scope
	}
	if p, ok := s.(*demangle.Qualified); ok {
		s = p.Name
	}
	next := "U" // the first unnamed type right after the name
	if t, ok := s.(*demangle.Template); ok {
		s, next = t.Name, "I"
	}
	n, ok := s.(*demangle.Name)
	if !ok || !strings.Contains(mangled, strconv.Itoa(len(n.Name))+n.Name+next) {
		return nil
	}
	if _, ok := q.Name.(*demangle.Destructor); ok {
		return &demangle.Destructor{Name: n}
	}
	return &demangle.Constructor{Name: n}
}

// unnamedType reports whether a is an unnamed type or a closure type.
func unnamedType(a demangle.AST) bool {
	switch a.(type) {
	case *demangle.UnnamedType, *demangle.Closure:
		return true
	}
	return false
}

// maybeUnresolvedName reports whether the mangled name may hold an
// unresolved name with a scope: "sr" before a type (T, D, S), a nested
// scope (N) or a source name's length.
func maybeUnresolvedName(name string) bool {
	for i := strings.Index(name, "sr"); i >= 0 && i+2 < len(name); {
		if c := name[i+2]; c >= '0' && c <= '9' || c == 'N' || c == 'T' || c == 'D' || c == 'S' {
			return true
		}
		j := strings.Index(name[i+2:], "sr")
		if j < 0 {
			break
		}
		i += 2 + j
	}
	return false
}

// maybeUnnamedStructor reports whether the mangled name may hold the
// constructor or destructor of an unnamed type or closure ("Ut_C1",
// "UlvE_D2"): an unnamed type and a structor after a '_'.
func maybeUnnamedStructor(name string) bool {
	if !strings.Contains(name, "Ut") && !strings.Contains(name, "Ul") {
		return false
	}
	for i := strings.IndexByte(name, '_'); i >= 0 && i+2 < len(name); {
		if c, d := name[i+1], name[i+2]; c == 'C' && (d >= '1' && d <= '5' || d == 'I') || c == 'D' && d >= '0' && d <= '5' {
			return true
		}
		j := strings.IndexByte(name[i+1:], '_')
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return false
}

// libibertyArgs returns the list args with its empty arguments replaced
// as libibertyTree says, and whether there were any that demangle
// prints otherwise than libiberty (not when all are empty: both print
// nothing).
func libibertyArgs(args []demangle.AST) ([]demangle.AST, bool) {
	last := -1
	for i, a := range args {
		if !emptyArg(a) {
			last = i
		}
	}
	if last < 0 {
		return nil, false
	}
	var out []demangle.AST
	for i, a := range args {
		if !emptyArg(a) {
			continue
		}
		if out == nil {
			out = append([]demangle.AST(nil), args...)
		}
		if i < last {
			out[i] = &demangle.Name{Name: ""}
		} else {
			out[i] = &demangle.Name{Name: packMark}
		}
	}
	return out, out != nil
}

// emptyArg reports whether demangle prints nothing for the argument a
// (its printState.isEmpty): an empty pack, or the expansion of one.
func emptyArg(a demangle.AST) bool {
	switch a := a.(type) {
	case *demangle.ArgumentPack:
		for _, e := range a.Args {
			if !emptyArg(e) {
				return false
			}
		}
		return true
	case *demangle.ExprList:
		return len(a.Exprs) == 0
	case *demangle.PackExpansion:
		return a.Pack != nil && emptyArg(a.Base)
	}
	return false
}

// legacyRustShape reports whether demangle.Filter takes name for a legacy
// Rust name (_ZN...17h<16 hex digits>E, with an optional ".suffix").
func legacyRustShape(name string) bool {
	if !strings.HasPrefix(name, "_ZN") {
		return false
	}
	if i := strings.LastIndex(name, "E."); i > 0 {
		name = name[:i+1]
	}
	return strings.HasSuffix(name, "E") && len(name) > 23 && name[len(name)-20:len(name)-17] == "17h"
}

// Limits of the Rust demangler on crafted names: its nesting depth (the
// 1,024 of libiberty, c++filt's library) and the number of code points a
// Punycode identifier may insert (decoding costs their number times the
// identifier's length).
const (
	rustMaxDepth       = 1024
	rustMaxPunycodeLen = 4096
)

// rustDemangler holds the state of one Rust demangling: the symbol after
// its prefix, the read position and the output.
type rustDemangler struct {
	sym      string
	next     int
	out      []byte
	max      int  // output bound
	err      bool // the symbol is malformed (or the output too long)
	skip     bool // parse without printing (impl paths, instantiating crate)
	legacy   bool
	depth    int    // nesting depth of the recursive parsers
	lifetime uint64 // bound lifetimes in scope (v0 binders)
}

// demangleRust demangles a legacy (_ZN...17h<hash>E) or v0 (_R...) Rust
// symbol; ok is false when name is not one or the result would exceed
// max bytes.
func demangleRust(name string, max int) (string, bool) {
	d := &rustDemangler{max: max}
	switch {
	case len(name) > 2 && name[:2] == "_R":
		d.sym = name[2:]
		if c := d.sym[0]; c < 'A' || c > 'Z' { // a v0 path starts with its tag
			return "", false
		}
		// Only [_0-9a-zA-Z], up to an optional "." suffix (LLVM's
		// ".llvm.NNN"), which is not printed.
		for i := 0; i < len(d.sym); i++ {
			c := d.sym[i]
			if c == '.' {
				d.sym = d.sym[:i]
				break
			}
			if !isRustIdentByte(c) {
				return "", false
			}
		}
		d.path(true)
		if !d.err && d.next < len(d.sym) {
			d.skip = true // the instantiating crate is not printed
			d.path(false)
		}
		if d.next != len(d.sym) {
			d.err = true
		}
	case len(name) > 3 && name[:3] == "_ZN":
		d.legacy = true
		d.sym = name[3:]
		if !d.legacyName() {
			return "", false
		}
	default:
		return "", false
	}
	if d.err {
		return "", false
	}
	return string(d.out), true
}

func isRustIdentByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// legacyName demangles a legacy name: length-prefixed path elements ending
// with E, the last of which is the hash "h" and 16 hexadecimal digits.
// A suffix after the E that starts with '.' (".llvm.NNN") is dropped.
func (d *rustDemangler) legacyName() bool {
	for i := 0; i < len(d.sym); i++ {
		c := d.sym[i]
		if !isRustIdentByte(c) && c != '$' && c != '.' && c != ':' && c != '@' {
			return false
		}
	}
	// Drop a ".suffix": cut back to an E that a '.' follows.
	n := len(d.sym)
	dot := true
	for n > 0 && !(dot && d.sym[n-1] == 'E') {
		dot = d.sym[n-1] == '.'
		n--
	}
	if n == 0 || d.sym[n-1] != 'E' {
		return false
	}
	n--
	if n <= 19 || d.sym[n-19:n-16] != "17h" {
		return false
	}
	d.sym = d.sym[:n]
	// First pass: every element is well formed and the last is a hash.
	var last string
	for d.next < len(d.sym) {
		last = d.ident().ascii
		if d.err || last == "" {
			return false
		}
	}
	if !isLegacyHash(last) {
		return false
	}
	d.next = 0
	for d.next < len(d.sym) {
		if d.next > 0 {
			d.print("::")
		}
		d.printIdent(d.ident())
	}
	return !d.err
}

// isLegacyHash reports whether s is "h" and 16 lowercase hexadecimal
// digits with at least 5 distinct digits, as rustc writes the hash.
func isLegacyHash(s string) bool {
	if len(s) != 17 || s[0] != 'h' {
		return false
	}
	var seen uint16
	for i := 1; i < 17; i++ {
		v := hexNibble(s[i])
		if v < 0 {
			return false
		}
		seen |= 1 << v
	}
	n := 0
	for ; seen != 0; seen &= seen - 1 {
		n++
	}
	return n >= 5
}

func hexNibble(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	}
	return -1
}

func (d *rustDemangler) peek() byte {
	if d.next < len(d.sym) {
		return d.sym[d.next]
	}
	return 0
}

func (d *rustDemangler) eat(c byte) bool {
	if d.peek() == c {
		d.next++
		return true
	}
	return false
}

func (d *rustDemangler) nextByte() byte {
	c := d.peek()
	if c == 0 {
		d.err = true
	} else {
		d.next++
	}
	return c
}

func (d *rustDemangler) print(s string) {
	if d.err || d.skip {
		return
	}
	if len(d.out)+len(s) > d.max {
		d.err = true
		return
	}
	d.out = append(d.out, s...)
}

func (d *rustDemangler) printUint(v uint64) { d.print(strconv.FormatUint(v, 10)) }

// enter counts one level of nesting, failing past rustMaxDepth; leave
// undoes it.
func (d *rustDemangler) enter() bool {
	if d.depth++; d.depth > rustMaxDepth {
		d.err = true
	}
	return !d.err
}

func (d *rustDemangler) leave() { d.depth-- }

// int62 parses a base-62 number ending in '_' ("_" is 0, "0_" is 1).
func (d *rustDemangler) int62() uint64 {
	if d.eat('_') {
		return 0
	}
	var x uint64
	for !d.err && !d.eat('_') {
		c := d.nextByte()
		x *= 62
		switch {
		case c >= '0' && c <= '9':
			x += uint64(c - '0')
		case c >= 'a' && c <= 'z':
			x += 10 + uint64(c-'a')
		case c >= 'A' && c <= 'Z':
			x += 36 + uint64(c-'A')
		default:
			d.err = true
			return 0
		}
	}
	return x + 1
}

// optInt62 parses an optional tag followed by a base-62 number: 0 when
// the tag is absent, else the number plus one.
func (d *rustDemangler) optInt62(tag byte) uint64 {
	if !d.eat(tag) {
		return 0
	}
	return 1 + d.int62()
}

// hexNibbles parses lowercase hexadecimal digits ending in '_' and
// returns their value (modulo 2^64) and number.
func (d *rustDemangler) hexNibbles() (v uint64, n int) {
	for !d.eat('_') {
		c := d.nextByte()
		h := hexNibble(c)
		if h < 0 {
			d.err = true
			return 0, 0
		}
		v = v<<4 | uint64(h)
		n++
	}
	return v, n
}

// rustIdent is an identifier: its ASCII part and, for a Punycode
// identifier (v0 "u" prefix), the encoded insertions.
type rustIdent struct {
	ascii, punycode string
}

func (id rustIdent) empty() bool { return id.ascii == "" && id.punycode == "" }

// ident parses a decimal length and that many bytes; in v0 names an
// optional "u" marks Punycode and an optional '_' separates the length
// from identifiers starting with a digit or '_'.
func (d *rustDemangler) ident() rustIdent {
	puny := !d.legacy && d.eat('u')
	c := d.nextByte()
	if c < '0' || c > '9' {
		d.err = true
		return rustIdent{}
	}
	n := int(c - '0')
	if c != '0' {
		for p := d.peek(); p >= '0' && p <= '9'; p = d.peek() {
			d.next++
			if n > len(d.sym) {
				d.err = true
				return rustIdent{}
			}
			n = n*10 + int(p-'0')
		}
	}
	if !d.legacy {
		d.eat('_')
	}
	if n > len(d.sym)-d.next {
		d.err = true
		return rustIdent{}
	}
	s := d.sym[d.next : d.next+n]
	d.next += n
	if !puny {
		return rustIdent{ascii: s}
	}
	// The last '_' separates the ASCII part from the insertions.
	i := len(s) - 1
	for i >= 0 && s[i] != '_' {
		i--
	}
	if i == len(s)-1 {
		d.err = true
		return rustIdent{}
	}
	if i < 0 {
		return rustIdent{punycode: s}
	}
	return rustIdent{ascii: s[:i], punycode: s[i+1:]}
}

// printIdent prints an identifier: legacy escapes ($LT$, $u20$, ..)
// decoded, v0 Punycode decoded to UTF-8.
func (d *rustDemangler) printIdent(id rustIdent) {
	if d.err || d.skip {
		return
	}
	if d.legacy {
		d.printLegacyIdent(id.ascii)
		return
	}
	if id.punycode == "" {
		d.print(id.ascii)
		return
	}
	d.printPunycode(id)
}

func (d *rustDemangler) printLegacyIdent(s string) {
	// The mangler puts '_' before an identifier that starts with an
	// escape, to start it with a letter or '_'.
	if len(s) >= 2 && s[0] == '_' && s[1] == '$' {
		s = s[1:]
	}
	for len(s) > 0 {
		n := 0
		switch s[0] {
		case '$':
			c, k := legacyEscape(s)
			if c == 0 {
				d.print(s) // unknown escape: the rest as it is
				return
			}
			d.print(string(rune(c)))
			n = k
		case '.':
			if len(s) >= 2 && s[1] == '.' {
				d.print("::")
				n = 2
			} else {
				d.print(".")
				n = 1
			}
		default:
			for n < len(s) && s[n] != '$' && s[n] != '.' {
				n++
			}
			d.print(s[:n])
		}
		s = s[n:]
	}
}

// legacyEscape decodes the escape "$...$" at the start of s: the
// character and the escape's length, or 0 when it is not one.
func legacyEscape(s string) (byte, int) {
	if len(s) < 3 || s[0] != '$' {
		return 0, 0
	}
	e := s[1:]
	var c byte
	n := 0
	if e[0] == 'C' {
		c, n = ',', 1
	} else if len(e) > 2 {
		n = 2
		switch e[:2] {
		case "SP":
			c = '@'
		case "BP":
			c = '*'
		case "RF":
			c = '&'
		case "LT":
			c = '<'
		case "GT":
			c = '>'
		case "LP":
			c = '('
		case "RP":
			c = ')'
		default:
			if e[0] == 'u' && len(e) > 3 {
				n = 3
				hi, lo := hexNibble(e[1]), hexNibble(e[2])
				if hi < 0 || lo < 0 || hi > 7 {
					return 0, 0
				}
				if c = byte(hi<<4 | lo); c < 0x20 {
					return 0, 0
				}
			}
		}
	}
	if c == 0 || len(e) <= n || e[n] != '$' {
		return 0, 0
	}
	return c, n + 2
}
