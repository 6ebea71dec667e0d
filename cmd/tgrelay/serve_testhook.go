package main

import (
	"log/slog"
)

// envGatewayStopAfterIntent is a crash-test seam: when set, serve's gateway
// logs "gateway: stopped after intent (test hook)" after journaling a
// call's intent and never sends it, so a test can kill the process between
// intent and outcome.
const envGatewayStopAfterIntent = "TGRELAY_TEST_GATEWAY_STOP_AFTER_INTENT"

func stopAfterIntent(log *slog.Logger) func(string) {
	return func(method string) {
		log.Warn("gateway: stopped after intent (test hook)", "method", method)
		select {}
	}
}
