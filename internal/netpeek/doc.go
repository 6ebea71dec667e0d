// Package netpeek tells, without blocking, whether an idle keep-alive
// connection can still carry a request: one the peer has closed, reset or
// written to unasked is not. It is the one home of that check for the
// module's own HTTP/1.1 clients (transport's, and forward's direct path).
package netpeek
