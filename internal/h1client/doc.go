// Package h1client holds the pieces of an HTTP/1.1 client exchange that
// the module's own clients share (transport's, for the Bot API, and
// forward's direct path, for the app): whether an idle keep-alive
// connection can still carry a request ([Closed]), the pool of idle
// connections to one destination ([Pool]), a budget of raw bytes under an
// answer's reader ([Limit]), reading an answer's head past its 1xx
// interim answers ([ReadHead]), ending a connection's blocked I/O when a
// context ends ([AfterDone]), and the rule a request header must meet
// before it is written ([CheckHeader]).
package h1client
