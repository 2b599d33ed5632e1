package sqllock_test

import (
	"fmt"
	"io"
	"log"
	"os"
	"testing"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// The driver logs every connection it finds cut; the tests cut many.
	_ = mysql.SetLogger(log.New(io.Discard, "", 0))
	code := m.Run()
	if err := stopServers(); err != nil {
		fmt.Fprintf(os.Stderr, "%v\n", err)
		code = 1
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
