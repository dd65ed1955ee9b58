package bpfunwind

// The BPF program, compiled by clang for the BPF target; the object and
// its Go bindings (walk_x86_bpfel.go, walk_x86_bpfel.o) are committed, so
// that building needs no clang.
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -tags linux -target amd64 -cc clang walk bpf/walk.c -- -I/usr/include/x86_64-linux-gnu -O2 -g -Wall
