package sqllock_test

import (
	"io"
	"log"
	"testing"

	"github.com/distlock/distlock/internal/leakcheck"
	"github.com/go-sql-driver/mysql"
)

func TestMain(m *testing.M) {
	// The driver logs every connection it finds cut; the tests cut many.
	_ = mysql.SetLogger(log.New(io.Discard, "", 0))
	leakcheck.VerifyTestMain(m, stopServers)
}
