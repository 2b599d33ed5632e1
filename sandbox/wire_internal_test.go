package sandbox

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// fakeServer accepts one connection on loopback, reads what the client
// sends first (up to n bytes; nothing when n is 0, for a server that
// speaks first), and answers reply.
func fakeServer(t *testing.T, n int, reply []byte) (addr string, got <-chan []byte) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	ch := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			ch <- nil
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, n)
		k := 0
		if n > 0 {
			k, _ = io.ReadAtLeast(c, buf, 1)
		}
		ch <- buf[:k]
		_, _ = c.Write(reply)
	}()
	return ln.Addr().String(), ch
}

func wireCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestRESPReplies(t *testing.T) {
	for _, tc := range []struct {
		name, reply string
		want        any
		wantErr     string
	}{
		{"simple", "+OK\r\n", "OK", ""},
		{"bulk", "$5\r\nhello\r\n", "hello", ""},
		{"null", "$-1\r\n", nil, ""},
		{"integer", ":12182\r\n", int64(12182), ""},
		{"error", "-ERR unknown command\r\n", nil, "ERR unknown command"},
		{"nested", "*2\r\n*4\r\n$5\r\nslots\r\n*2\r\n:0\r\n:5460\r\n$5\r\nnodes\r\n*0\r\n-ERR inner\r\n",
			[]any{[]any{"slots", []any{int64(0), int64(5460)}, "nodes", []any{}}, respError("ERR inner")}, ""},
		{"truncated", "*3\r\n:1\r\n", nil, "EOF"},
		{"garbage", "hello\r\n", nil, "unexpected reply"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, sent := fakeServer(t, 256, []byte(tc.reply))
			got, err := redisDo(wireCtx(t), addr, nil, "CLUSTER", "SHARDS")
			if req := <-sent; string(req) != "*2\r\n$7\r\nCLUSTER\r\n$6\r\nSHARDS\r\n" {
				t.Errorf("sent %q", req)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("reply = %#v, want %#v", got, tc.want)
			}
		})
	}
}

// pgMessage is a backend message: type, length, body.
func pgMessage(typ byte, body []byte) []byte {
	return append(binary.BigEndian.AppendUint32([]byte{typ}, uint32(len(body)+4)), body...)
}

func pgError(code, msg string) []byte {
	body := []byte("SFATAL\x00C" + code + "\x00M" + msg + "\x00\x00")
	return pgMessage('E', body)
}

func TestPostgresPingReadsFirstReply(t *testing.T) {
	for _, tc := range []struct {
		name    string
		reply   []byte
		wantErr string
	}{
		{"auth request", pgMessage('R', []byte{0, 0, 0, 10, 'S', 'C', 'R', 'A', 'M', 0, 0}), ""},
		{"starting up", pgError("57P03", "the database system is starting up"), "starting up (SQLSTATE 57P03)"},
		{"hba refusal", pgError("28000", "no pg_hba.conf entry"), ""},
		{"closed", nil, "EOF"},
		{"other message", pgMessage('Z', []byte{'I'}), "message type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, sent := fakeServer(t, 256, tc.reply)
			err := postgresPing(wireCtx(t), addr, nil)
			req := <-sent
			if len(req) < 8 || binary.BigEndian.Uint32(req) != uint32(len(req)) || binary.BigEndian.Uint32(req[4:]) != 3<<16 ||
				!strings.Contains(string(req), "user\x00"+PostgresUser+"\x00database\x00"+Database+"\x00\x00") {
				t.Errorf("startup message %q", req)
			}
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestMySQLPingReadsGreeting(t *testing.T) {
	addr, _ := fakeServer(t, 0, []byte{20, 0, 0, 0, 10, '1', '1', 0})
	if err := mysqlPing(wireCtx(t), addr); err != nil {
		t.Errorf("protocol-10 greeting: %v", err)
	}
	// An error packet (0xff) instead of a greeting: "Too many connections".
	addr, _ = fakeServer(t, 0, []byte{9, 0, 0, 0, 0xff, 0x10, 0x04, 'T', 'o', 'o'})
	if err := mysqlPing(wireCtx(t), addr); err == nil || !strings.Contains(err.Error(), "protocol 255") {
		t.Errorf("error packet: err = %v, want protocol 255", err)
	}
}

func TestBrokerSourceLookup(t *testing.T) {
	root := t.TempDir()
	deep := filepath.Join(root, "a", "b")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, ok := findModuleRoot(deep, libraryModule); ok {
		t.Fatalf("found module %s under a bare temporary directory", libraryModule)
	}
	if err := os.WriteFile(filepath.Join(root, "a", "go.mod"), []byte("// x\nmodule example.com/other\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "go.mod"), []byte("module \""+libraryModule+"\"\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, ok := findModuleRoot(deep, libraryModule); !ok || got != root {
		t.Errorf("findModuleRoot = %q, %v; want %q (past the other module's go.mod)", got, ok, root)
	}
	// This checkout has the broker's sources, and the binary's name
	// follows them.
	src, err := brokerSource()
	if err != nil {
		t.Fatal(err)
	}
	if modulePath(filepath.Join(src, "go.mod")) != brokerModule {
		t.Errorf("brokerSource = %s, without the go.mod of %s", src, brokerModule)
	}
	if _, err := hashSources(src); err != nil {
		t.Error(err)
	}
	t.Setenv(EnvBroker, filepath.Join(root, "missing"))
	if _, err := brokerBinary(context.Background()); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), EnvBroker) {
		t.Errorf("missing %s: err = %v, want ErrUnavailable naming the variable", EnvBroker, err)
	}
}
