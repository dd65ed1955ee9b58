package symbolize

// The grammar of Rust's v0 mangling (RFC 2603), as c++filt prints it:
// Punycode identifiers, back references, paths, generic arguments, types
// and constants. The decoder's primitives and the legacy form are in
// demangle.go.

import "strconv"

// printPunycode decodes a v0 Punycode identifier (RFC 3492 with Rust's
// parameters) and prints it as UTF-8. Deltas cut short print nothing, as
// in libiberty.
func (d *rustDemangler) printPunycode(id rustIdent) {
	if len(id.punycode) > rustMaxPunycodeLen {
		d.err = true
		return
	}
	const (
		base = 36
		tmin = 1
		tmax = 26
		skew = 38
	)
	out := make([]uint32, 0, len(id.ascii)+len(id.punycode))
	for i := 0; i < len(id.ascii); i++ {
		out = append(out, uint32(id.ascii[i]))
	}
	damp, bias, i := uint64(700), uint64(72), uint64(0)
	c := uint32(0x80)
	p := id.punycode
	for pos := 0; pos < len(p); {
		var delta, w, k uint64 = 0, 1, 0
		for {
			k += base
			t := uint64(0)
			if k >= bias {
				t = k - bias
			}
			t = min(max(t, tmin), tmax)
			if pos >= len(p) {
				return
			}
			ch := p[pos]
			pos++
			var dv uint64
			switch {
			case ch >= 'a' && ch <= 'z':
				dv = uint64(ch - 'a')
			case ch >= '0' && ch <= '9':
				dv = 26 + uint64(ch-'0')
			default:
				d.err = true
				return
			}
			delta += dv * w
			w *= base - t
			if dv < t {
				break
			}
		}
		n := uint64(len(out)) + 1
		i += delta
		c += uint32(i / n)
		i %= n
		out = append(out, 0)
		copy(out[i+1:], out[i:])
		out[i] = c
		if pos == len(p) {
			break
		}
		i++
		delta /= damp
		damp = 2
		delta += delta / n
		k = 0
		for delta > ((base-tmin)*tmax)/2 {
			delta /= base - tmin
			k += base
		}
		bias = k + ((base-tmin+1)*delta)/(delta+skew)
	}
	b := make([]byte, 0, 4*len(out))
	for _, c := range out {
		// UTF-8 written as libiberty writes it (no check for surrogates
		// or values past U+10FFFF).
		switch {
		case c < 0x80:
			b = append(b, byte(c))
		case c < 0x800:
			b = append(b, 0xc0|byte(c>>6&0x3f), 0x80|byte(c&0x3f))
		case c < 0x10000:
			b = append(b, 0xe0|byte(c>>12&0x3f), 0x80|byte(c>>6&0x3f), 0x80|byte(c&0x3f))
		default:
			b = append(b, 0xf0|byte(c>>18), 0x80|byte(c>>12&0x3f), 0x80|byte(c>>6&0x3f), 0x80|byte(c&0x3f))
		}
	}
	d.print(string(b))
}

// backref parses a back reference and demangles what it names with f,
// read at the position named, which must come before the reference
// (start is where its tag was); then reading goes on after the reference.
func (d *rustDemangler) backref(start int, f func()) {
	v := d.int62()
	if d.err || d.skip {
		return
	}
	if v >= uint64(start) {
		d.err = true
		return
	}
	old := d.next
	d.next = int(v)
	f()
	d.next = old
}

// list demangles items with item up to the closing 'E', printing sep
// between them, and returns how many there were.
func (d *rustDemangler) list(sep string, item func()) int {
	i := 0
	for ; !d.err && !d.eat('E'); i++ {
		if i > 0 {
			d.print(sep)
		}
		item()
	}
	return i
}

// path demangles a v0 path; inValue is set for the symbol's own path,
// where generic arguments print as ::<...>.
func (d *rustDemangler) path(inValue bool) {
	if d.err || !d.enter() {
		return
	}
	defer d.leave()
	start := d.next
	switch tag := d.nextByte(); tag {
	case 'C': // crate root
		dis := d.optInt62('s')
		name := d.ident()
		d.printIdent(name)
		d.print("[")
		d.print(strconv.FormatUint(dis, 16))
		d.print("]")
	case 'N': // nested path in a namespace
		ns := d.nextByte()
		isLower, isUpper := ns >= 'a' && ns <= 'z', ns >= 'A' && ns <= 'Z'
		if !isLower && !isUpper {
			d.err = true
			return
		}
		d.path(inValue)
		dis := d.optInt62('s')
		name := d.ident()
		if isUpper { // closures, shims and other special namespaces
			d.print("::{")
			switch ns {
			case 'C':
				d.print("closure")
			case 'S':
				d.print("shim")
			default:
				d.print(string(rune(ns)))
			}
			if !name.empty() {
				d.print(":")
				d.printIdent(name)
			}
			d.print("#")
			d.printUint(dis)
			d.print("}")
		} else if !name.empty() {
			d.print("::")
			d.printIdent(name)
		}
	case 'M', 'X', 'Y': // inherent impl, trait impl, trait definition
		if tag != 'Y' {
			d.optInt62('s')
			skip := d.skip
			d.skip = true // the impl's own path is not printed
			d.path(inValue)
			d.skip = skip
		}
		d.print("<")
		d.typ()
		if tag != 'M' {
			d.print(" as ")
			d.path(false)
		}
		d.print(">")
	case 'I': // generic arguments
		d.path(inValue)
		if inValue {
			d.print("::")
		}
		d.print("<")
		d.list(", ", d.genericArg)
		d.print(">")
	case 'B':
		d.backref(start, func() { d.path(inValue) })
	default:
		d.err = true
	}
}

func (d *rustDemangler) genericArg() {
	switch {
	case d.eat('L'):
		d.printLifetime(d.int62())
	case d.eat('K'):
		d.constant()
	default:
		d.typ()
	}
}

// printLifetime prints the lifetime of index lt: 0 is '_, others count
// back from the innermost binder ('a, 'b, ..., then '_26, ...).
func (d *rustDemangler) printLifetime(lt uint64) {
	d.print("'")
	if lt == 0 {
		d.print("_")
		return
	}
	depth := d.lifetime - lt
	if depth < 26 {
		d.print(string(rune('a' + depth)))
	} else {
		d.print("_")
		d.printUint(depth)
	}
}

// binder parses an optional binder of late-bound lifetimes ("G"),
// printing "for<'a, 'b> ".
func (d *rustDemangler) binder() {
	if d.err {
		return
	}
	n := d.optInt62('G')
	if n == 0 {
		return
	}
	if d.skip { // nothing to print: do not loop over a crafted count
		d.lifetime += n
		return
	}
	d.print("for<")
	for i := uint64(0); i < n && !d.err; i++ {
		if i > 0 {
			d.print(", ")
		}
		d.lifetime++
		d.printLifetime(1)
	}
	d.print("> ")
}

// basicRustType names the basic type of a one-letter tag, or "".
func basicRustType(tag byte) string {
	switch tag {
	case 'b':
		return "bool"
	case 'c':
		return "char"
	case 'e':
		return "str"
	case 'u':
		return "()"
	case 'a':
		return "i8"
	case 's':
		return "i16"
	case 'l':
		return "i32"
	case 'x':
		return "i64"
	case 'n':
		return "i128"
	case 'i':
		return "isize"
	case 'h':
		return "u8"
	case 't':
		return "u16"
	case 'm':
		return "u32"
	case 'y':
		return "u64"
	case 'o':
		return "u128"
	case 'j':
		return "usize"
	case 'f':
		return "f32"
	case 'd':
		return "f64"
	case 'z':
		return "!"
	case 'p':
		return "_"
	case 'v':
		return "..."
	}
	return ""
}

// typ demangles a v0 type.
func (d *rustDemangler) typ() {
	if d.err {
		return
	}
	start := d.next
	tag := d.nextByte()
	if s := basicRustType(tag); s != "" {
		d.print(s)
		return
	}
	if !d.enter() {
		return
	}
	defer d.leave()
	switch tag {
	case 'R', 'Q': // references
		d.print("&")
		if d.eat('L') {
			if lt := d.int62(); lt != 0 {
				d.printLifetime(lt)
				d.print(" ")
			}
		}
		if tag != 'R' {
			d.print("mut ")
		}
		d.typ()
	case 'P', 'O': // raw pointers
		if tag == 'P' {
			d.print("*const ")
		} else {
			d.print("*mut ")
		}
		d.typ()
	case 'A', 'S': // arrays and slices
		d.print("[")
		d.typ()
		if tag == 'A' {
			d.print("; ")
			d.constant()
		}
		d.print("]")
	case 'T': // tuples
		d.print("(")
		if d.list(", ", d.typ) == 1 {
			d.print(",")
		}
		d.print(")")
	case 'F': // function pointers
		d.fnType()
	case 'D': // trait objects
		d.print("dyn ")
		old := d.lifetime
		d.binder()
		d.list(" + ", d.dynTrait)
		d.lifetime = old
		if !d.eat('L') {
			d.err = true
			return
		}
		if lt := d.int62(); lt != 0 {
			d.print(" + ")
			d.printLifetime(lt)
		}
	case 'B':
		d.backref(start, d.typ)
	default:
		d.next = start // a path, which reads the tag again
		d.path(false)
	}
}

// fnType demangles a function pointer type after its 'F' tag:
// [for<'a>] [unsafe] [extern "ABI"] fn(args) [-> ret].
func (d *rustDemangler) fnType() {
	old := d.lifetime
	d.binder()
	if d.eat('U') {
		d.print("unsafe ")
	}
	if d.eat('K') {
		abi := "C"
		if !d.eat('C') {
			id := d.ident()
			if id.ascii == "" || id.punycode != "" {
				d.err = true
				d.lifetime = old
				return
			}
			abi = id.ascii
		}
		d.print(`extern "`)
		// '-' in ABI names is mangled as '_'. (libiberty checks the
		// first byte after each '_' only from the second on: kept.)
		for i := 0; i < len(abi); i++ {
			if abi[i] == '_' {
				d.print(abi[:i])
				d.print("-")
				abi = abi[i+1:]
				i = 0
			}
		}
		d.print(abi)
		d.print(`" `)
	}
	d.print("fn(")
	d.list(", ", d.typ)
	d.print(")")
	if !d.eat('u') { // () as return type is not printed
		d.print(" -> ")
		d.typ()
	}
	d.lifetime = old
}

// dynTrait demangles one trait of a trait object, with its associated
// type bindings inside its generic arguments: dyn Trait<T, Assoc = X>.
func (d *rustDemangler) dynTrait() {
	if d.err {
		return
	}
	open := d.pathMaybeOpenGenerics()
	for d.eat('p') {
		if open {
			d.print(", ")
		} else {
			d.print("<")
		}
		open = true
		d.printIdent(d.ident())
		d.print(" = ")
		d.typ()
	}
	if open {
		d.print(">")
	}
}

// pathMaybeOpenGenerics demangles a path, leaving the '>' of its generic
// arguments out (open true) so that bindings can follow.
func (d *rustDemangler) pathMaybeOpenGenerics() (open bool) {
	if d.err || !d.enter() {
		return false
	}
	defer d.leave()
	start := d.next
	switch {
	case d.eat('B'):
		d.backref(start, func() { open = d.pathMaybeOpenGenerics() })
	case d.eat('I'):
		d.path(false)
		d.print("<")
		open = true
		d.list(", ", d.genericArg)
	default:
		d.path(false)
	}
	return open
}

// constant demangles a constant generic argument, followed by ": TYPE".
func (d *rustDemangler) constant() {
	if d.err || !d.enter() {
		return
	}
	defer d.leave()
	start := d.next
	if d.eat('B') {
		d.backref(start, d.constant)
		return
	}
	tag := d.nextByte()
	switch tag {
	case 'p': // placeholder
		d.print("_")
		return
	case 'h', 't', 'm', 'y', 'o', 'j':
		d.constUint()
	case 'a', 's', 'l', 'x', 'n', 'i':
		if d.eat('n') {
			d.print("-")
		}
		d.constUint()
	case 'b':
		v, n := d.hexNibbles()
		switch {
		case n != 1 || v > 1:
			d.err = true
		case v == 0:
			d.print("false")
		default:
			d.print("true")
		}
	case 'c':
		v, n := d.hexNibbles()
		if n == 0 || n > 8 {
			d.err = true
			return
		}
		d.print("'")
		switch {
		case v == '\t':
			d.print(`\t`)
		case v == '\r':
			d.print(`\r`)
		case v == '\n':
			d.print(`\n`)
		case v > ' ' && v < '~':
			d.print(string(rune(v)))
		default:
			d.print(`\u{`)
			d.print(strconv.FormatUint(v, 16))
			d.print("}")
		}
		d.print("'")
	default:
		d.err = true
		return
	}
	if !d.err {
		d.print(": ")
		d.print(basicRustType(tag))
	}
}

// constUint prints an unsigned constant: decimal, or its hexadecimal
// digits when they do not fit in 64 bits.
func (d *rustDemangler) constUint() {
	if d.err {
		return
	}
	start := d.next
	v, n := d.hexNibbles()
	switch {
	case d.err:
	case n > 16:
		d.print("0x")
		d.print(d.sym[start : start+n])
	case n > 0:
		d.printUint(v)
	default:
		d.err = true
	}
}
