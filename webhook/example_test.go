package webhook_test

import (
	"fmt"

	"github.com/tgrelay/tgrelay/webhook"
)

// The registered address carries an owner tag derived from the secret, so a
// process can tell its own webhook from another deployment's.
func ExampleTaggedURL() {
	u, err := webhook.TaggedURL("https://bot.example.com/telegram", "my-webhook-secret")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(u[:len("https://bot.example.com/telegram?owner=")])
	// Output: https://bot.example.com/telegram?owner=
}
