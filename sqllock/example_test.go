package sqllock_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/sqllock"
)

// Open checks the URL before dialling: a bad table name is a configuration
// error, and the password never appears in it.
func Example_invalidURL() {
	_, err := distlock.Open(context.Background(), "mysql://app:secret@db.internal:3306/app?table=app-locks")
	fmt.Println(errors.Is(err, distlock.ErrInvalidConfig))
	fmt.Println(err)
	// Output:
	// true
	// distlock: open mysql://app:xxxxx@db.internal:3306/app?table=app-locks: sqllock: invalid configuration: parameter table="app-locks": want letters, digits or underscores (at most 58), not starting with a digit
}

// DDL prints the statements a DBA runs to create the tables by hand.
func ExampleDDL() {
	ddl, err := sqllock.DDL("app_locks")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(ddl[0])
	// Output:
	// CREATE TABLE IF NOT EXISTS `app_locks` (
	//   name VARBINARY(1024) NOT NULL,
	//   PRIMARY KEY (name)
	// ) ENGINE=InnoDB
}
