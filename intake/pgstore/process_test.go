package pgstore_test

import "os"

const workerEnv = "TGRELAY_PGSTORE_WORKER"

func isWorker() bool { return os.Getenv(workerEnv) != "" }

func workerMain() { os.Exit(2) }
