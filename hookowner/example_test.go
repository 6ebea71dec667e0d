package hookowner_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/tgrelay/tgrelay/hookowner"
)

// The registered address carries an owner tag derived from the secret, so a
// process can tell its own webhook from another deployment's.
func ExampleTaggedURL() {
	u, err := hookowner.TaggedURL("https://bot.example.com/telegram", "my-webhook-secret")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(u[:len("https://bot.example.com/telegram?owner=")])
	// Output: https://bot.example.com/telegram?owner=
}

// A relay claims the webhook on start, then watches that it stays its own.
// Against the real Bot API, c is a *botapi.Client.
func ExampleWatch() {
	var c hookowner.Caller = fakeCaller{url: "https://other.example.net/hook"}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := hookowner.Watch(ctx, c, hookowner.WatchConfig{
		URL: "https://bot.example.com/telegram", Secret: "my-webhook-secret", Interval: 20 * time.Millisecond,
		Func: func(st hookowner.Status, err error) {
			if err == nil && !st.Owned {
				fmt.Println("the webhook moved to", st.OwnerHost)
				cancel()
			}
		},
	})
	fmt.Println(errors.Is(err, context.Canceled))
	// Output:
	// the webhook moved to other.example.net
	// true
}

// fakeCaller answers getWebhookInfo with a fixed address.
type fakeCaller struct{ url string }

func (f fakeCaller) Call(_ context.Context, method string, _ any) (json.RawMessage, error) {
	if method != "getWebhookInfo" {
		return nil, errors.New("unexpected " + method)
	}
	return json.Marshal(map[string]any{"url": f.url})
}
