package ws

import (
	"bufio"
	"bytes"
	"errors"
	"net/http"
	"strings"
	"testing"
)

func TestClientHandshakeRequestParses(t *testing.T) {
	key := NewClientKey()
	if !ValidClientKey(key) {
		t.Fatalf("NewClientKey() = %q, not a valid key", key)
	}
	req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(AppendClientHandshake(nil, "127.0.0.1:8080", "/ws/r1?since=3", key, Negotiated{Protocol: "scalechat.v1", Extensions: DeflateExtension}))))
	if err != nil {
		t.Fatal(err)
	}
	if req.Method != "GET" || req.URL.RequestURI() != "/ws/r1?since=3" || req.Host != "127.0.0.1:8080" {
		t.Errorf("request line: %s %s host %s", req.Method, req.URL.RequestURI(), req.Host)
	}
	for name, want := range map[string]string{"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Key": key, "Sec-WebSocket-Version": "13",
		"Sec-WebSocket-Extensions": DeflateExtension, "Sec-WebSocket-Protocol": "scalechat.v1"} {
		if got := req.Header.Get(name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
}

func TestParseServerHandshake(t *testing.T) {
	const key = "dGhlIHNhbXBsZSBub25jZQ=="
	const accept = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
	ok := "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " + accept + "\r\n\r\n"
	tests := []struct {
		name     string
		resp     string
		wantN    int
		wantErr  bool
		wantCode int
	}{
		{"ok", ok, len(ok), false, 0},
		{"ok with trailing frame", ok + "\x81\x02hi", len(ok), false, 0},
		{"lowercase and token list", "HTTP/1.1 101 OK\r\nupgrade: WebSocket\r\nconnection: keep-alive, upgrade\r\nsec-websocket-accept: " + accept + "\r\n\r\n", -1, false, 0},
		{"incomplete", ok[:len(ok)-2], 0, false, 0},
		{"refused", "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n", 0, true, 503},
		{"bad accept", strings.Replace(ok, accept, "xxx", 1), 0, true, 101},
		{"no upgrade", strings.Replace(ok, "Upgrade: websocket\r\n", "", 1), 0, true, 101},
		{"no connection", strings.Replace(ok, "Connection: Upgrade\r\n", "", 1), 0, true, 101},
		{"garbage", "hello\r\n\r\n", 0, true, 0},
		{"bad status", "HTTP/1.1 1x1 Foo\r\n\r\n", 0, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, _, err := ParseServerHandshake([]byte(tt.resp), key)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if err != nil {
				var he *HandshakeError
				if !errors.As(err, &he) {
					t.Fatalf("err = %T, want *HandshakeError", err)
				}
				if he.Status != tt.wantCode {
					t.Errorf("status %d, want %d", he.Status, tt.wantCode)
				}
				return
			}
			want := tt.wantN
			if want < 0 {
				want = len(tt.resp)
			}
			if n != want {
				t.Errorf("n = %d, want %d", n, want)
			}
		})
	}
	withHeaders := strings.Replace(ok, "\r\n\r\n", "\r\nSec-WebSocket-Protocol: scalechat.v1\r\nSec-WebSocket-Extensions: permessage-deflate\r\n\r\n", 1)
	if _, got, err := ParseServerHandshake([]byte(withHeaders), key); err != nil || got != (Negotiated{Protocol: "scalechat.v1", Extensions: "permessage-deflate"}) {
		t.Errorf("negotiated = %+v, %v", got, err)
	}
	if _, _, err := ParseServerHandshake(bytes.Repeat([]byte("a"), MaxResponseHead+1), key); !errors.Is(err, ErrResponseTooLong) {
		t.Errorf("long head: err = %v", err)
	}
}
