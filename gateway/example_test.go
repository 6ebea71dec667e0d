package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/tgrelay/tgrelay/gateway"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
	"github.com/tgrelay/tgrelay/telegramtest"
	"github.com/tgrelay/tgrelay/throttle"
	"github.com/tgrelay/tgrelay/transport"
	"github.com/tgrelay/tgrelay/wire"
)

// An app sends its reply through the gateway on behalf of an update; when
// the update is retried, the identical reply is answered from the journal
// instead of reaching the chat twice.
func Example() {
	tg := telegramtest.NewServer(telegramtest.Config{})
	defer tg.Close()
	chat, _ := tg.NewPrivateChat(tg.NewUser("Ann"))

	base, _ := transport.New(transport.Config{})
	limiter, _ := throttle.New(throttle.Config{})
	store := memstore.New()
	gw, err := gateway.New(gateway.Config{
		Token:      tg.Token,
		APIRoot:    tg.URL,
		Transport:  throttle.NewTransport(limiter, base),
		Store:      store,
		OwnsIntake: true,
	})
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(gw) // serve: the app-facing listener
	defer srv.Close()
	defer gw.Close(context.Background()) // before the store closes: the outcomes still being journaled

	ctx := context.Background()
	// The relay recorded update 1 and an attempt claimed it.
	now := time.Now()
	store.Add(ctx, intake.Incoming{UpdateID: 1, Body: []byte(`{}`), ReceivedAt: now})
	claim := func() intake.Identity {
		id, _, _ := store.Claim(ctx, 1, intake.ClaimOpts{Now: time.Now(), LeaseUntil: time.Now().Add(time.Minute), MaxAttempts: 3})
		return id
	}
	reply := func(id intake.Identity) {
		body := fmt.Sprintf(`{"chat_id":%d,"text":"hello"}`, chat.ID)
		req, _ := http.NewRequest("POST", wire.AttemptRoot(srv.URL, id.UpdateID, id.Attempt, id.ClaimID)+"/bot"+tg.Token+"/sendMessage", bytes.NewBufferString(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		resp.Body.Close()
		fmt.Println("attempt", id.Attempt, "status", resp.StatusCode, "replayed", resp.Header.Get(gateway.HeaderReplayed) == "true")
	}

	first := claim()
	reply(first)
	// The handler fails after sending; the update is retried.
	store.Settle(ctx, first, intake.Settlement{State: intake.StateFailed, At: time.Now(), RetryAt: time.Now()})
	reply(claim())
	fmt.Println("messages in the chat:", len(tg.MessagesTo(chat.ID)))

	// Output:
	// attempt 1 status 200 replayed false
	// attempt 2 status 200 replayed true
	// messages in the chat: 1
}

// A gateway's answer bound comes from its limiter's MaxWait and its
// response timeout; the server that serves it gets the derived write
// timeout, so it never cuts a call the gateway is still answering.
func ExampleGateway_Bounds() {
	limiter, _ := throttle.New(throttle.Config{}) // Telegram's limits, a minute's wait
	base, _ := transport.New(transport.Config{ResponseTimeout: 30 * time.Second})
	gw, err := gateway.New(gateway.Config{
		Token:           "123:abc",
		Transport:       throttle.NewTransport(limiter, base),
		ResponseTimeout: 30 * time.Second, // the transport's
	})
	if err != nil {
		log.Fatal(err)
	}
	b := gw.Bounds()
	srv := &http.Server{Handler: gw, ReadHeaderTimeout: 10 * time.Second, WriteTimeout: b.WriteTimeout}
	fmt.Println("wait:", b.MaxWait, "answer:", b.ResponseTimeout, "answered within:", b.Answer)
	fmt.Println("server write timeout:", srv.WriteTimeout)
	// Output:
	// wait: 1m0s answer: 30s answered within: 1m40s
	// server write timeout: 1m45s
}
