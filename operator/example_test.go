package operator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/operator"
)

// Example posts two alerts into forum topics of an operator chat, through a
// stand-in for the Bot API, and drains the channel before closing it.
func Example() {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m struct {
			Text     string `json:"text"`
			ThreadID int64  `json:"message_thread_id"`
		}
		_ = json.NewDecoder(r.Body).Decode(&m)
		mu.Lock()
		got = append(got, fmt.Sprintf("thread %d: %s", m.ThreadID, m.Text))
		mu.Unlock()
		io.WriteString(w, `{"ok":true,"result":{"message_id":1}}`)
	}))
	defer srv.Close()

	client, err := botapi.New("123456789:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", botapi.Config{APIRoot: srv.URL})
	if err != nil {
		fmt.Println(err)
		return
	}
	ch, err := operator.New(operator.Config{
		ChatID:          -1001234567890,
		Topics:          map[string]int64{"payments": 12, "errors": 34},
		Client:          client,
		MinInterval:     10 * time.Millisecond, // keep the example quick; the default is 3 s
		SensitiveValues: []string{"hunter2"},
		OnDrop:          func(d operator.Drop) { fmt.Println("dropped:", d.Reason, d.Text) },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ch.Post("New payment: 42 EUR", "payments")
	ch.Post("Login failed with password hunter2", "errors")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ch.Drain(ctx); err != nil {
		fmt.Println(err)
	}
	ch.Close()
	ch.Post("too late", "")

	mu.Lock()
	defer mu.Unlock()
	for _, s := range got {
		fmt.Println(s)
	}
	// Output:
	// dropped: closed too late
	// thread 12: New payment: 42 EUR
	// thread 34: Login failed with password [redacted]
}

// ExampleDedupe uses the dedupe window on its own, for alerts an application
// sends itself.
func ExampleDedupe() {
	d, err := operator.NewDedupe(operator.DedupeConfig{Window: time.Hour})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, text := range []string{"db down (attempt 1)", "db down (attempt 2)", "disk full"} {
		v := d.Admit(text, "")
		if v.Send {
			fmt.Printf("send %q\n", v.Text)
		} else {
			fmt.Printf("hold %q: %s\n", text, v.Reason)
		}
	}
	// Output:
	// send "db down (attempt 1)"
	// hold "db down (attempt 2)": repeated
	// send "disk full"
}
