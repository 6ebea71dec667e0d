package sqlschema_test

import (
	"fmt"
	"net/http"

	"github.com/tgrelay/tgrelay/intake/internal/sqlschema"
)

// The SQL stores keep an attempt's answer header as one JSON text column.
func ExampleEncodeHeader() {
	stored := sqlschema.EncodeHeader(http.Header{"Retry-After": {"3"}})
	fmt.Println(stored)
	h, err := sqlschema.DecodeHeader(stored)
	fmt.Println(h.Get("Retry-After"), err)
	// Output:
	// {"Retry-After":"3"}
	// 3 <nil>
}

// A table name reaches SQL only once ValidateTable accepts it.
func ExampleValidateTable() {
	fmt.Println(sqlschema.ValidateTable("telegram_updates"))
	fmt.Println(sqlschema.ValidateTable(`updates"; DROP TABLE x; --`) != nil)
	// Output:
	// <nil>
	// true
}
