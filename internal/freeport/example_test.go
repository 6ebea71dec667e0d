package freeport_test

import (
	"fmt"
	"net"

	"github.com/tgrelay/tgrelay/internal/freeport"
)

func ExampleAddr() {
	addr, err := freeport.Addr()
	if err != nil {
		fmt.Println(err)
		return
	}
	// Name the address to a child process (here: listen on it ourselves).
	l, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Close()
	fmt.Println("listening")
	// Output: listening
}
