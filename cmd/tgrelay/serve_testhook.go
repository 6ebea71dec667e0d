package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/pprof"
	"runtime/trace"

	"github.com/tgrelay/tgrelay/intake/memstore"
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

// envMemProfile is envCPUProfile's sibling: when set, serve writes its
// allocation profile (every allocation sampled since start) to that path when
// it returns (`bench relay -memprofile`).
const envMemProfile = "TGRELAY_TEST_MEMPROFILE"

// envTrace is envCPUProfile's sibling: when set, serve writes a runtime
// execution trace of its whole run to that path (for the scheduler's
// waits: go tool trace -pprof=sched).
const envTrace = "TGRELAY_TEST_TRACE"

// startCPUProfileFromEnv starts the profiles envCPUProfile, envMemProfile
// and envTrace ask for and returns the func that stops and writes them;
// without the variables it does nothing.
func startCPUProfileFromEnv() (stop func(), err error) {
	stopCPU, err := startRecording(envCPUProfile, pprof.StartCPUProfile, pprof.StopCPUProfile)
	if err != nil {
		return nil, err
	}
	stopTrace, err := startRecording(envTrace, trace.Start, trace.Stop)
	if err != nil {
		stopCPU()
		return nil, err
	}
	memPath := os.Getenv(envMemProfile)
	return func() {
		stopTrace()
		stopCPU()
		if memPath == "" {
			return
		}
		if f, err := os.Create(memPath); err == nil {
			pprof.Lookup("allocs").WriteTo(f, 0)
			f.Close()
		}
	}, nil
}

// startRecording starts a whole-run recording (a CPU profile, an execution
// trace) into the file the variable env names, and returns what stops it
// and closes the file; without the variable it does nothing.
func startRecording(env string, start func(io.Writer) error, stopRecording func()) (stop func(), err error) {
	path := os.Getenv(env)
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", env, err)
	}
	if err := start(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", env, err)
	}
	return func() {
		stopRecording()
		f.Close()
	}, nil
}

// envMemoryStore is a benchmark seam: when it is "1", serve keeps its
// updates in memory (intake/memstore) instead of the --db it opened, so
// `bench relay -memory` can measure what serve costs without a durable
// store. Nothing survives the process: never set it outside a benchmark.
const envMemoryStore = "TGRELAY_TEST_MEMORY_STORE"

// memoryStoreFromEnv returns st, or, when envMemoryStore asks for it, an
// in-memory store in its place (st closed), with a warning in the log.
func memoryStoreFromEnv(st *openedStore, log *slog.Logger) *openedStore {
	if os.Getenv(envMemoryStore) != "1" {
		return st
	}
	st.Close()
	log.Warn("serve: keeping updates in memory, not in --db (test hook): a crash loses them", "env", envMemoryStore)
	mem := memstore.New()
	return &openedStore{store: mem, AdminStore: mem, kind: "memory", close: func() {}}
}
