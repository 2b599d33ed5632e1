package sqllock_test

import (
	"io"
	"log"

	"github.com/go-sql-driver/mysql"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// The driver logs every connection it finds cut; the tests cut many.
	_ = mysql.SetLogger(log.New(io.Discard, "", 0))
	goleak.VerifyTestMain(m)
}
