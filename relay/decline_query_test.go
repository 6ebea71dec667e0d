package relay

import "testing"

// queryBodies are updates queryOf must read as encoding/json does.
var queryBodies = []string{
	`{"update_id":1,"message":{"chat":{"id":1},"text":"hi"}}`,
	`{"update_id":1,"callback_query":{"id":"c1","from":{"id":1}}}`,
	`{"update_id":1,"pre_checkout_query":{"id":"p1"}}`,
	`{"update_id":1,"shipping_query":{"id":"s1"}}`,
	`{"update_id":1,"inline_query":{"id":"i1"}}`,
	`{"update_id":1,"Callback_QUERY":{"id":"c2"}}`,
	`{"update_id":1,"callback_\u0071uery":{"id":"c3"}}`,
	"{\"update_id\":1,\"\u017fhipping_query\":{\"id\":\"s2\"}}",
	`{"update_id":1,"message":{"text":"a \"quoted\" word"}}`,
	`{"update_id":1,"message":{"text":"QuErY"}}`,
	`{"update_id":1,"callback_query":{"id":7}}`,
	`not json`, ``,
}

// TestQueryOfMatchesDecode checks that queryOf's shortcut (no decoding of
// a body that cannot name a query) changes no answer.
func TestQueryOfMatchesDecode(t *testing.T) {
	t.Parallel()
	for _, b := range queryBodies {
		gq, gok := queryOf([]byte(b))
		wq, wok := decodeQuery([]byte(b))
		if gq != wq || gok != wok {
			t.Errorf("queryOf(%s) = %+v %t, decodeQuery = %+v %t", b, gq, gok, wq, wok)
		}
	}
	if q, ok := queryOf([]byte(queryBodies[5])); !ok || q.id != "c2" {
		t.Errorf("a key differing in case: queryOf = %+v %t, want the callback query c2", q, ok)
	}
	if mayNameQuery([]byte(queryBodies[0])) {
		t.Error("a plain message is decoded")
	}
}

// FuzzQueryOf checks queryOf against decodeQuery on any body.
func FuzzQueryOf(f *testing.F) {
	for _, b := range queryBodies {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		gq, gok := queryOf(body)
		wq, wok := decodeQuery(body)
		if gq != wq || gok != wok {
			t.Fatalf("queryOf(%q) = %+v %t, decodeQuery = %+v %t", body, gq, gok, wq, wok)
		}
	})
}
