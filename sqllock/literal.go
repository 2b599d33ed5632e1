package sqllock

import (
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
)

// bind returns q with each ? replaced by the next of args written as an
// SQL literal: a string or []byte as a hexadecimal binary literal
// (X'6b6579'), an integer in decimal. The result is one plain statement
// without parameters, which any *sql.DB of go-sql-driver sends as one
// COM_QUERY (one round trip), whatever its configuration: with parameters
// and without interpolateParams, database/sql would prepare it on the
// server first (COM_STMT_PREPARE, EXECUTE and CLOSE: one more round trip
// per statement). Hexadecimal digits and decimal integers are all a value
// can put into the text, so no value can change a statement, under any
// sql_mode or character set. The ? of q are all placeholders (the
// driver's statements have no other).
func bind(q string, args ...any) string { return bindWith(q, writeHex, args) }

// bindWith replaces each ? of q with the next of args: a string or []byte
// through writeBytes (the dialect's binary literal of hexadecimal digits),
// an integer in decimal. Nothing else can reach the statement's text.
func bindWith(q string, writeBytes func(*strings.Builder, []byte), args []any) string {
	var b strings.Builder
	n := len(q)
	for _, a := range args {
		switch v := a.(type) {
		case string:
			n += 20 + 2*len(v)
		case []byte:
			n += 20 + 2*len(v)
		default:
			n += 20
		}
	}
	b.Grow(n)
	for _, a := range args {
		i := strings.IndexByte(q, '?')
		if i < 0 {
			panic(fmt.Sprintf("sqllock: %d arguments for %q", len(args), q))
		}
		b.WriteString(q[:i])
		q = q[i+1:]
		var buf [40]byte
		switch v := a.(type) {
		case string:
			writeBytes(&b, []byte(v))
		case []byte:
			writeBytes(&b, v)
		case int:
			b.Write(strconv.AppendInt(buf[:0], int64(v), 10))
		case int64:
			b.Write(strconv.AppendInt(buf[:0], v, 10))
		case uint64:
			b.Write(strconv.AppendUint(buf[:0], v, 10))
		default:
			panic(fmt.Sprintf("sqllock: cannot bind %T", a))
		}
	}
	if strings.IndexByte(q, '?') >= 0 {
		panic(fmt.Sprintf("sqllock: too few arguments (%d) for a statement", len(args)))
	}
	b.WriteString(q)
	return b.String()
}

// writeHex writes v as X'..', the binary string literal of its bytes
// (X” is the empty one).
func writeHex(b *strings.Builder, v []byte) {
	b.WriteString("X'")
	var buf [128]byte
	for len(v) > 0 {
		k := min(len(v), len(buf)/2)
		hex.Encode(buf[:], v[:k])
		b.Write(buf[:2*k])
		v = v[k:]
	}
	b.WriteByte('\'')
}
