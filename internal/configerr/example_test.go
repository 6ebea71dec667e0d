package configerr_test

import (
	"errors"
	"fmt"

	"github.com/tgrelay/tgrelay/internal/configerr"
)

// A package checks a URL field with the shared rule and reports it as its
// own field, without quoting the URL.
func ExampleBaseURL() {
	if _, err := configerr.BaseURL("https://bot:hunter2@api.example/"); err != nil {
		err := configerr.New("relay", "APIRoot", "%w", err)
		fmt.Println(err)
		fmt.Println(errors.Is(err, configerr.ErrNotBaseURL))
	}
	// Output:
	// relay: APIRoot is not a base URL: want an absolute http:// or https:// URL without a user, query or fragment
	// true
}
