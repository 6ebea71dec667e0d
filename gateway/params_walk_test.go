package gateway_test

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tgrelay/tgrelay/gateway"
)

// TestJSONParamsWalkMatchesDecode builds JSON objects of the shapes a Bot
// API call takes and the ones it should not (keys repeated or escaped,
// nulls, texts with escapes and non-ASCII, numbers in every form, nested
// values, white space anywhere) and checks that walking each one gives
// the canonical parameters decoding it whole gives.
func TestJSONParamsWalkMatchesDecode(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 7))
	keys := []string{"chat_id", "text", "parse_mode", "reply_markup", "a", "k\\u0065y", "ключ", "x\\\"y", "entities"}
	texts := []string{"hi", "", "Привет 👋", "a\\\"b", "\\u00e9\\ud83d\\ude00", "\\ud800", "<&>", "tab\\there", "\\/"}
	numbers := []string{"0", "-0", "12345", "-1001234567890", "1.50", "1e3", "-2.5E-7", "123456789012345678901234567890"}
	space := func() string { return []string{"", " ", "\n", "\t ", "\r\n"}[rng.IntN(5)] }
	var value func(depth int) string
	value = func(depth int) string {
		switch n := rng.IntN(8); {
		case n == 0:
			return "null"
		case n == 1:
			return []string{"true", "false"}[rng.IntN(2)]
		case n == 2:
			return numbers[rng.IntN(len(numbers))]
		case n == 3 && depth < 3:
			var parts []string
			for range rng.IntN(4) {
				parts = append(parts, space()+value(depth+1)+space())
			}
			return "[" + strings.Join(parts, ",") + "]"
		case n == 4 && depth < 3:
			var parts []string
			for range rng.IntN(4) {
				parts = append(parts, space()+strconv.Quote(keys[rng.IntN(4)])+space()+":"+space()+value(depth+1))
			}
			return "{" + strings.Join(parts, ",") + "}"
		default:
			return `"` + texts[rng.IntN(len(texts))] + `"`
		}
	}
	for i := range 20000 {
		var members []string
		for range rng.IntN(7) {
			members = append(members, space()+`"`+keys[rng.IntN(len(keys))]+`"`+space()+":"+space()+value(0)+space())
		}
		body := []byte(space() + "{" + strings.Join(members, ",") + "}" + space())
		got, gotOK := gateway.JSONParams(body)
		want, wantOK := gateway.JSONParamsDecoded(body)
		if !wantOK {
			t.Fatalf("case %d: the generator made a body the decoder refuses: %s", i, body)
		}
		if gotOK != wantOK || !slices.Equal(got, want) {
			t.Fatalf("case %d, body %s:\nwalked  %q, %v\ndecoded %q, %v", i, body, got, gotOK, want, wantOK)
		}
	}
}

// BenchmarkJSONParams sets the walk beside the whole decode on the bodies
// a fenced call most often carries. One op is one body's parameters.
func BenchmarkJSONParams(b *testing.B) {
	bodies := map[string]string{
		"sendMessage":          `{"chat_id":123456789,"text":"hello there, this is a reply of typical length"}`,
		"sendMessage-cyrillic": `{"chat_id":123456789,"text":"Привет! Это ответ обычной длины 👋","parse_mode":"HTML"}`,
		"sendMessage-keyboard": `{"chat_id":123456789,"text":"pick one","reply_markup":{"inline_keyboard":[[{"text":"yes","callback_data":"y"},{"text":"no","callback_data":"n"}]]}}`,
	}
	for _, name := range []string{"sendMessage", "sendMessage-cyrillic", "sendMessage-keyboard"} {
		body := []byte(bodies[name])
		for _, form := range []struct {
			name string
			f    func([]byte) ([]string, bool)
		}{{"walk", gateway.JSONParams}, {"decoded", gateway.JSONParamsDecoded}} {
			b.Run(name+"/"+form.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, ok := form.f(body); !ok {
						b.Fatal("refused")
					}
				}
			})
		}
	}
}
