package main

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/netip"

	"golang.org/x/net/dns/dnsmessage"
)

// heStubResolver returns a net.Resolver whose every query is answered in
// process, over an in-memory stream connection, with the given A records
// (and no AAAA records). It lets an unmodified net.Dialer dial a host name
// with several addresses exactly as it would after a real DNS lookup,
// without any network beyond loopback.
func heStubResolver(a []netip.Addr) *net.Resolver {
	return &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
			client, server := net.Pipe()
			go heServeDNS(server, a)
			return client, nil
		},
	}
}

// heServeDNS answers length-prefixed DNS queries on c until it is closed.
func heServeDNS(c net.Conn, a []netip.Addr) {
	defer c.Close()
	for {
		var n [2]byte
		if _, err := io.ReadFull(c, n[:]); err != nil {
			return
		}
		q := make([]byte, binary.BigEndian.Uint16(n[:]))
		if _, err := io.ReadFull(c, q); err != nil {
			return
		}
		var p dnsmessage.Parser
		h, err := p.Start(q)
		if err != nil {
			return
		}
		question, err := p.Question()
		if err != nil {
			return
		}
		b := dnsmessage.NewBuilder(make([]byte, 2, 512), dnsmessage.Header{
			ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired, RecursionAvailable: true,
		})
		b.EnableCompression()
		b.StartQuestions()
		b.Question(question)
		b.StartAnswers()
		if question.Type == dnsmessage.TypeA {
			for _, ip := range a {
				b.AResource(dnsmessage.ResourceHeader{Name: question.Name, Class: dnsmessage.ClassINET, TTL: 60},
					dnsmessage.AResource{A: ip.As4()})
			}
		}
		msg, err := b.Finish()
		if err != nil {
			return
		}
		binary.BigEndian.PutUint16(msg[:2], uint16(len(msg)-2))
		if _, err := c.Write(msg); err != nil {
			return
		}
	}
}
