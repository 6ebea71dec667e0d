package main

import (
	"fmt"
	"log/slog"
	"os"
	"runtime/pprof"
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

// envCPUProfile is a benchmark seam: when set, serve writes a CPU profile
// of its whole run to that path, stopped when serve returns (`bench relay
// -cpuprofile` sets it on its serve children).
const envCPUProfile = "TGRELAY_TEST_CPUPROFILE"

// startCPUProfileFromEnv starts the profile envCPUProfile asks for and
// returns the func that stops it; without the variable it does nothing.
func startCPUProfileFromEnv() (stop func(), err error) {
	path := os.Getenv(envCPUProfile)
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", envCPUProfile, err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", envCPUProfile, err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
