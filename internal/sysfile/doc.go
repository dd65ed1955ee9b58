// Package sysfile opens and reads files with fewer system calls than
// package os, for the regular files and /proc files that sframe stack
// reads on every run.
//
// os.Open makes a descriptor non-blocking and offers it to the runtime's
// poller, which refuses regular files, and then makes it blocking again:
// six system calls (four fcntl and an epoll_ctl besides the open), and
// the poller's creation (three more) on the first. Open makes the same
// *os.File with two (open and one fcntl, in os.NewFile). On the 2-vCPU
// VM of docs/PERFORMANCE.md a system call costs 1-2 us; a capture opens
// a dozen files.
package sysfile
