package transport_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"

	"github.com/tgrelay/tgrelay/transport"
)

// Example sends a Bot API call through the transport and branches on the
// three outcomes: an answer, a request that never left (safe to repeat), and
// an unknown outcome (never repeat blindly).
func Example() {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"ok":true,"result":{"message_id":1}}`)
	}))
	defer api.Close()

	client, err := transport.NewClient(transport.Config{
		// No proxy for this loopback example; the default honours HTTPS_PROXY.
		Proxy: func(*http.Request) (*url.URL, error) { return nil, nil },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.CloseIdleConnections()

	call := func(base string) {
		resp, err := client.Post(base+"/bot123456:TOKEN/sendMessage", "application/json",
			strings.NewReader(`{"chat_id":42,"text":"hi"}`))
		var nd *transport.NotDispatchedError
		switch {
		case errors.As(err, &nd):
			fmt.Println("not dispatched at stage", nd.Stage, "- safe to send again")
		case err != nil:
			fmt.Println("outcome unknown - do not repeat blindly")
		default:
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			fmt.Println(resp.StatusCode, string(body))
		}
	}
	call(api.URL)

	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	closedPort := "http://" + ln.Addr().String()
	ln.Close()
	call(closedPort)

	// Output:
	// 200 {"ok":true,"result":{"message_id":1}}
	// not dispatched at stage connect - safe to send again
}
