module github.com/sframekit/sframekit

go 1.26.0

require golang.org/x/sys v0.49.0

require github.com/go-delve/delve v1.27.2

require github.com/ianlancetaylor/demangle v0.0.0-20260724033716-83e58baca724

require github.com/google/pprof v0.0.0-20260906184651-6331bc6350fe

require github.com/klauspost/compress v1.20.3

require github.com/cilium/ebpf v0.22.0
