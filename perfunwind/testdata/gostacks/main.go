// Command gostacks runs goroutines on every thread, for the tests of how
// perfunwind measures the stack copy that cut walks needed: half of them
// spin at the bottom of 200 calls of about 600 bytes each (120 KB of
// stack, more than a copy holds), the other half two calls deep, whose
// walks are complete and end at the tops of their own stacks, which lie
// anywhere in the heap, apart from the deep ones'.
//
//	gostacks ROUNDS
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
)

//go:noinline
func down(n int) int {
	var local [512]byte
	local[n%512] = byte(n)
	if n == 0 {
		s := 0
		for i := 0; i < 200000; i++ {
			s += i ^ int(local[i%512])
		}
		runtime.Gosched()
		return s
	}
	return down(n-1) + int(local[3])
}

func main() {
	rounds, err := strconv.Atoi(os.Args[len(os.Args)-1])
	if len(os.Args) != 2 || err != nil {
		fmt.Fprintln(os.Stderr, "usage: gostacks ROUNDS")
		os.Exit(2)
	}
	var wg sync.WaitGroup
	for g := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			depth := 2
			if g%2 == 1 {
				depth = 200
			}
			for range rounds {
				down(depth)
			}
		}()
	}
	wg.Wait()
	fmt.Println("done")
}
