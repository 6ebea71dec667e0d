package h1client_test

import (
	"fmt"
	"net"

	"github.com/tgrelay/tgrelay/internal/h1client"
)

// Before a keep-alive connection carries another request, check that the
// server has not closed it meanwhile.
func ExampleClosed() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			defer c.Close()
			c.Read(make([]byte, 1)) // wait for the client to go
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		panic(err)
	}
	defer c.Close()
	fmt.Println("closed:", h1client.Closed(c))
	// Output: closed: false
}
