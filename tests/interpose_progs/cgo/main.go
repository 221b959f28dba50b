// What a Go program with cgo sees (tests/test_interpose_transparent.py): the
// signals Go found ignored at start, and, with "segv", how it dies of a fault
// in C code (Go's own report and exit 2 when the fault handler it found is
// SIG_DFL; the found handler's way when it is another one), or with "term"
// of a SIGTERM it does not handle.
package main

/*
#include <signal.h>
static int query(int sig) {
    struct sigaction sa;
    if (sigaction(sig, 0, &sa) != 0) return -1;
    return sa.sa_handler == SIG_DFL ? 0 : sa.sa_handler == SIG_IGN ? 1 : 2;
}
static void fault(void) { *(volatile int *)0 = 1; }
*/
import "C"

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	for s := 1; s <= 64; s++ {
		fmt.Println("ignored", s, signal.Ignored(syscall.Signal(s)))
	}
	fmt.Println("C view of SIGUSR2", C.query(C.int(syscall.SIGUSR2)))
	if len(os.Args) > 1 && os.Args[1] == "segv" {
		C.fault()
	}
	if len(os.Args) > 1 && os.Args[1] == "term" {
		// Go dies of it itself: SIG_DFL back (through libc), then raise
		syscall.Kill(os.Getpid(), syscall.SIGTERM)
		select {}
	}
	os.Exit(3)
}
