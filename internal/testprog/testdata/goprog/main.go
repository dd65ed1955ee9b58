// Command goprog works in goroutines, for the tests of how sframe unwinds
// Go programs: ROUNDS times, it starts goroutines that recurse deep
// enough to grow their stacks (runtime.morestack), allocate garbage for
// the collector (runtime.systemstack, the mark workers), sort, hash and
// read the clock (runtime.nanotime1, time.now), then prints "done".
//
//	goprog ROUNDS
package main

import (
	"crypto/sha256"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"
)

var sink []byte

//go:noinline
func recurse(depth int, b []byte) int {
	var local [64]byte
	copy(local[:], b)
	if depth == 0 {
		h := sha256.Sum256(local[:])
		return int(h[0])
	}
	return recurse(depth-1, local[:]) + int(local[depth%64])
}

//go:noinline
func churn(n int) int {
	s := make([]int, n)
	for i := range s {
		s[i] = (i * 7919) % n
		if i%64 == 0 {
			sink = make([]byte, 256+i%1024)
		}
	}
	slices.Sort(s)
	return s[n/2]
}

//go:noinline
func worker(seed int) int {
	t := time.Now()
	r := recurse(400, []byte{byte(seed)})
	r += churn(20000 + seed)
	return r + int(time.Since(t)%2)
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: goprog ROUNDS")
		os.Exit(2)
	}
	rounds, err := strconv.Atoi(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "goprog:", err)
		os.Exit(2)
	}
	var total int
	var mu sync.Mutex
	for i := range rounds {
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := worker(i*8 + g)
				mu.Lock()
				total += r
				mu.Unlock()
			}()
		}
		wg.Wait()
	}
	fmt.Println("done", total%2+1 > 0)
}
