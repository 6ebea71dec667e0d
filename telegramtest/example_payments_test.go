package telegramtest_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"sync"
	"time"

	"github.com/tgrelay/tgrelay/telegramtest"
)

// A user pays an invoice; the bot confirms the order 12 s later, past the
// 10 s Telegram gives it: the answer is refused, the payment fails, and
// the bot never receives a successful_payment. The clock is the test's.
func ExampleServer_Pay() {
	var (
		mu  sync.Mutex
		now = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	srv := telegramtest.NewServer(telegramtest.Config{NowFunc: clock})
	defer srv.Close()
	ada := srv.NewUser("Ada")
	chat, _ := srv.NewPrivateChat(ada)

	call := func(method string, v url.Values) (ok bool, description string, result json.RawMessage) {
		resp, err := srv.Client().PostForm(srv.URL+"/bot"+srv.Token+"/"+method, v)
		if err != nil {
			return false, err.Error(), nil
		}
		defer resp.Body.Close()
		var env struct {
			OK          bool            `json:"ok"`
			Description string          `json:"description"`
			Result      json.RawMessage `json:"result"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&env)
		return env.OK, env.Description, env.Result
	}
	_, _, res := call("sendInvoice", url.Values{"chat_id": {fmt.Sprint(chat.ID)}, "title": {"Coffee"},
		"description": {"A cup"}, "payload": {"order-1"}, "currency": {"XTR"}, "prices": {`[{"label":"Cup","amount":30}]`}})
	var invoice struct {
		MessageID int64 `json:"message_id"`
	}
	_ = json.Unmarshal(res, &invoice)

	upd, _ := srv.Pay(chat, ada, invoice.MessageID)
	mu.Lock()
	now = now.Add(12 * time.Second)
	mu.Unlock()
	ok, desc, _ := call("answerPreCheckoutQuery", url.Values{"pre_checkout_query_id": {upd.PreCheckoutQueryID}, "ok": {"true"}})
	fmt.Println(ok, desc)

	p := srv.Payments()[0]
	fmt.Println(p.State, p.FailReason, p.TelegramPaymentChargeID == "")
	// Output:
	// false Bad Request: query is too old and response timeout expired or query ID is invalid
	// failed timeout true
}
