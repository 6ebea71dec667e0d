package pgstore_test

import (
	"testing"

	"github.com/tgrelay/tgrelay/internal/pgtest"
)

func TestMain(m *testing.M) {
	if isWorker() {
		workerMain()
		return
	}
	pgtest.Main(m)
}
