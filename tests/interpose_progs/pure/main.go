// A pure-Go program (static: the interposer never loads in it) started by a
// profiled parent: the dispositions it inherits, read with raw system calls.
package main

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
	os.Exit(3)
}
