// Rust names for the demangler test: generic functions instantiated with
// the kinds of types and constants v0 mangling encodes (references with
// lifetimes, raw pointers, arrays, slices, tuples, function pointers with
// ABIs and binders, trait objects with associated types, const generics),
// closures, trait impls, a non-ASCII identifier (Punycode) and the
// standard library's own functions. Build: rustc -O [-C
// symbol-mangling-version=v0] rustprog.rs.
#![allow(dead_code, non_snake_case, uncommon_codepoints)]
use std::collections::HashMap;
use std::thread;

// black_box keeps the optimizer from folding the calls away (std::hint's
// needs Rust 1.66; Debian 12's rustc is 1.63).
#[inline(never)]
fn black_box<T>(x: T) -> T {
    unsafe {
        let y = std::ptr::read_volatile(&x);
        std::mem::forget(x);
        y
    }
}

trait Shape {
    fn area(&self) -> f64;
}
struct Square(f64);
impl Shape for Square {
    #[inline(never)]
    fn area(&self) -> f64 {
        self.0 * self.0
    }
}
struct Wrap<T, const N: usize>([T; N]);
impl<T: Copy + Default, const N: usize> Wrap<T, N> {
    #[inline(never)]
    fn first(&self) -> T {
        black_box(self.0.first().copied().unwrap_or_default())
    }
}

#[inline(never)]
fn generic<T: std::fmt::Debug>(v: T) -> String {
    black_box(format!("{:?}", v))
}

#[inline(never)]
fn with_const<const N: usize, const B: bool, const C: char, const I: i32>() -> usize {
    black_box(N + B as usize + C as usize + I as usize)
}

#[inline(never)]
fn größe(x: u32) -> u32 {
    black_box(x) * 2
}

#[inline(never)]
fn call_dyn(it: &mut dyn Iterator<Item = u8>) -> Option<u8> {
    black_box(it.next())
}

extern "C" fn c_abi(x: i32) -> i32 {
    x + 1
}

// takes_fn needs no Debug: rustc before 1.70 has none for function
// pointers with binders.
#[inline(never)]
fn takes_fn<F: Copy>(f: F) -> usize {
    std::mem::size_of_val(&black_box(f))
}

fn main() {
    let mut m: HashMap<String, Box<dyn Shape + Send>> = HashMap::new();
    m.insert("a".into(), Box::new(Square(2.0)));
    let h = thread::spawn(move || {
        let c = |x: i32| x + 1;
        black_box(c(1));
        m.values().map(|s| s.area()).sum::<f64>()
    });
    let x = 5u64;
    println!("{}", generic((1u8, -2i16, 'c', "s", [1u32; 3], &x as *const u64, &[1i64, 2][..])));
    println!("{}", generic(Some(Box::new(3.5f32))));
    println!("{}", generic(((), true, 7i128, 8u128, 9isize, 10usize)));
    println!("{}", with_const::<3, true, 'x', -4>());
    println!("{}", Wrap([1u16, 2, 3]).first());
    println!("{}", größe(black_box(3)));
    println!("{:?}", call_dyn(&mut vec![1u8, 2].into_iter()));
    println!("{}", takes_fn(c_abi as extern "C" fn(i32) -> i32));
    println!("{}", takes_fn((|a: &u8| *a) as for<'a> fn(&'a u8) -> u8));
    println!("{}", takes_fn(größe as unsafe fn(u32) -> u32));
    println!("{}", h.join().unwrap());
}
