package telegramtest_test

import (
	"encoding/json"
	"fmt"
	"net/url"

	"github.com/tgrelay/tgrelay/telegramtest"
)

func Example() {
	srv := telegramtest.NewServer(telegramtest.Config{})
	defer srv.Close()

	ada := srv.NewUser("Ada")
	chat, _ := srv.NewPrivateChat(ada)
	srv.SendCommand(chat, ada, "start", "")

	// The bot under test polls for updates…
	resp, _ := srv.Client().Get(srv.URL + "/bot" + srv.Token + "/getUpdates")
	var updates struct {
		Result []struct {
			Message struct{ Text string } `json:"message"`
		} `json:"result"`
	}
	json.NewDecoder(resp.Body).Decode(&updates)
	resp.Body.Close()
	fmt.Println("bot got:", updates.Result[0].Message.Text)

	// …and answers, twice by mistake. Telegram's short per-chat burst lets
	// both through; the ledger's Repeats catches the duplicate.
	for range 2 {
		resp, _ := srv.Client().PostForm(srv.URL+"/bot"+srv.Token+"/sendMessage",
			url.Values{"chat_id": {fmt.Sprint(chat.ID)}, "text": {"Welcome!"}})
		resp.Body.Close()
		fmt.Println("sendMessage:", resp.Status)
	}

	for _, m := range srv.Messages() {
		fmt.Printf("ledger: %s %q\n", m.Method, m.Text)
	}
	fmt.Println("repeats:", len(srv.Repeats()))
	// Output:
	// bot got: /start
	// sendMessage: 200 OK
	// sendMessage: 200 OK
	// ledger: sendMessage "Welcome!"
	// ledger: sendMessage "Welcome!"
	// repeats: 1
}
