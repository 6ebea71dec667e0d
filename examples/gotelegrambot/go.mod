module github.com/tgrelay/tgrelay/examples/gotelegrambot

go 1.26.0

require (
	github.com/go-telegram/bot v1.19.0
	github.com/tgrelay/tgrelay v0.0.0
)

require (
	golang.org/x/net v0.62.0 // indirect
	golang.org/x/text v0.43.0 // indirect
)

replace github.com/tgrelay/tgrelay => ../..
