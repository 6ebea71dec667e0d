package gateway_test

import (
	"testing"

	"github.com/tgrelay/tgrelay/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }
