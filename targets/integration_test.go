//go:build linux

package targets

import (
	"strings"
	"testing"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/symbolize"
)

// TestSymbolizeLiveThreads joins the two packages as the unwinder will:
// every thread's PC is symbolized through its module's bias, and the
// return addresses on the workers' stacks name worker_recurse with a line.
func TestSymbolizeLiveThreads(t *testing.T) {
	c := startChild(t)
	p, err := AttachProcess(c.pid)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	s := symbolize.New()
	defer s.Close()
	mods := p.Modules()
	for i := range mods {
		if mods[i].IsVDSO() {
			img, err := arch.ReadImage(p.Memory(), &mods[i])
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Register(mods[i].Path, strings.NewReader(string(img))); err != nil {
				t.Fatal(err)
			}
		}
	}
	lookup := func(pc uint64) (symbolize.Symbol, *arch.Module) {
		m := arch.FindModule(mods, pc)
		if m == nil {
			return symbolize.Symbol{}, nil
		}
		key := m.File
		if m.IsVDSO() {
			key = m.Path
		}
		sym, _ := s.Lookup(key, m.ELFAddr(pc))
		return sym, m
	}
	for _, th := range p.Threads() {
		sym, m := lookup(th.Regs.PC())
		if m == nil || sym.Name == "" {
			t.Errorf("thread %s: pc %#x unsymbolized (module %v)", th.Name, th.Regs.PC(), m)
			continue
		}
		t.Logf("thread %-8s pc %#x = %s in %s", th.Name, th.Regs.PC(), sym, m.Path)
		if !strings.HasPrefix(th.Name, "worker") {
			continue
		}
		buf := make([]byte, 4096)
		p.Memory().ReadAt(buf, int64(th.Regs.SP()))
		n := 0
		for i := 0; i+8 <= len(buf); i += 8 {
			v := uint64(0)
			for k := 7; k >= 0; k-- {
				v = v<<8 | uint64(buf[i+k])
			}
			// Return addresses: look up v-1, inside the call.
			if sym, m := lookup(v - 1); m != nil && sym.Name == "worker_recurse" {
				if sym.Line == 0 || !strings.HasSuffix(sym.File, "targprog.c") {
					t.Errorf("return address %#x: %s", v, sym)
				}
				n++
			}
		}
		if n == 0 {
			t.Errorf("thread %s: no return address into worker_recurse", th.Name)
		}
	}
}
