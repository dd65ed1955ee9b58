// Package cputime reads the CPU time the process has used, for the
// benchmarks that report it next to the wall time: on a shared machine
// wall time per operation swings with the load, CPU time much less.
package cputime
