package bpfunwind

import (
	"slices"
	"sort"

	"github.com/sframekit/sframekit/perfunwind"
)

// Mirror is the processes' executable mappings as the kernel's tables
// must have them: changed as soon as the records that change them are
// read (MMAP, FORK of a process, exec), not in time order, so that the
// walker has the tables of a new program, library or process as soon as
// it runs. Records of different CPUs come out of order; a FORK read
// after the child's first MMAPs keeps them over the parent's copy.
// Mirror's methods return the processes whose table changed.
type Mirror struct {
	procs map[uint32][]*perfunwind.Mapping
}

// NewMirror returns an empty mirror.
func NewMirror() *Mirror { return &Mirror{procs: map[uint32][]*perfunwind.Mapping{}} }

// Set makes pid's mappings maps (read from /proc, say).
func (m *Mirror) Set(pid uint32, maps []*perfunwind.Mapping) {
	var own []*perfunwind.Mapping
	for _, x := range maps {
		if x.Exec && !x.Kernel {
			own = append(own, x)
		}
	}
	m.procs[pid] = own
}

// Mappings returns pid's mappings, sorted, nil for none.
func (m *Mirror) Mappings(pid uint32) []*perfunwind.Mapping { return m.procs[pid] }

// Mmap adds mapping x to pid, cutting the parts of older ones it
// overlaps, as the kernel does.
func (m *Mirror) Mmap(pid uint32, x *perfunwind.Mapping) {
	m.procs[pid] = insert(m.procs[pid], x)
}

// insert returns maps with x added.
func insert(maps []*perfunwind.Mapping, x *perfunwind.Mapping) []*perfunwind.Mapping {
	i := sort.Search(len(maps), func(i int) bool { return maps[i].End > x.Start })
	j := i
	var keep []*perfunwind.Mapping
	for ; j < len(maps) && maps[j].Start < x.End; j++ {
		o := maps[j]
		if o.Start < x.Start {
			keep = append(keep, cut(o, o.Start, x.Start))
		}
		if o.End > x.End {
			keep = append(keep, cut(o, x.End, o.End))
		}
	}
	keep = append(keep, x)
	sort.Slice(keep, func(a, b int) bool { return keep[a].Start < keep[b].Start })
	return slices.Replace(slices.Clone(maps), i, j, keep...)
}

// cut returns the part [start, end) of o.
func cut(o *perfunwind.Mapping, start, end uint64) *perfunwind.Mapping {
	n := *o
	n.Start, n.End = start, end
	n.Pgoff = o.Pgoff + (start - o.Start)
	return &n
}

// Fork gives the new process pid a copy of its parent's mappings, under
// those it already has.
func (m *Mirror) Fork(pid, ppid uint32) {
	maps := slices.Clone(m.procs[ppid])
	for _, x := range m.procs[pid] {
		maps = insert(maps, x)
	}
	m.procs[pid] = maps
}

// Exec empties pid's mappings: a new program replaces them.
func (m *Mirror) Exec(pid uint32) { delete(m.procs, pid) }

// Exit forgets pid.
func (m *Mirror) Exit(pid uint32) { delete(m.procs, pid) }
