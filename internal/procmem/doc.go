// Package procmem reads the memory of a live process: the one reader of
// another process's memory, for the stack tracer (targets) and for the
// profiler's look at JIT code (perfunwind).
package procmem
