package telegramtest_test

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/tgrelay/tgrelay/telegramtest"
)

// A user replies to the bot with a photo; the bot answers in MarkdownV2,
// and the test waits for the answer on the server's signal, then reads
// it as Telegram shows it: plain text and entities.
func ExampleServer_WaitMessages() {
	srv := telegramtest.NewServer(telegramtest.Config{})
	defer srv.Close()
	ada := srv.NewUser("Ada")
	chat, _ := srv.NewPrivateChat(ada)

	upd, _ := srv.Send(chat, ada, telegramtest.UserMessage{
		Text:  "my cat",
		Photo: &telegramtest.UserFile{Name: "cat.jpg", Data: []byte("…")},
	})

	// The bot (here, inline) answers the photo.
	go func() {
		resp, err := srv.Client().PostForm(srv.URL+"/bot"+srv.Token+"/sendMessage", url.Values{
			"chat_id":             {fmt.Sprint(chat.ID)},
			"text":                {"*Nice* cat\\!"},
			"parse_mode":          {"MarkdownV2"},
			"reply_to_message_id": {fmt.Sprint(upd.MessageID)},
		})
		if err == nil {
			resp.Body.Close()
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	msgs, err := srv.WaitMessages(ctx, chat.ID, 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	m := msgs[0]
	fmt.Printf("%q replying to %d\n", m.PlainText, m.ReplyTo)
	for _, e := range m.Entities {
		fmt.Printf("%s at %d+%d\n", e.Type, e.Offset, e.Length)
	}
	// Output:
	// "Nice cat!" replying to 1
	// bold at 0+4
}
