//go:build linux

package bench

import (
	"bufio"
	"net"
	"testing"
	"time"
)

// echoServer answers every line with itself until the test ends.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// roundTrip sends a line over c and reports whether it came back.
func roundTrip(c net.Conn) bool {
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && line == "ping\n"
}

// A link forwards until cut; a cut closes its connections and refuses new
// ones for its length, then the link forwards again.
func TestRedisLinkCut(t *testing.T) {
	l, err := newRedisLink(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	c, err := net.Dial("tcp", l.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !roundTrip(c) {
		t.Fatal("no answer through the link")
	}
	const d = 300 * time.Millisecond
	l.cut(d)
	if roundTrip(c) {
		t.Error("a connection survived the cut")
	}
	if c2, err := net.Dial("tcp", l.addr()); err == nil {
		if roundTrip(c2) {
			t.Error("a new connection was forwarded during the cut")
		}
		c2.Close()
	}
	time.Sleep(d) // the cut's own length: what is tested
	c3, err := net.Dial("tcp", l.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	if !roundTrip(c3) {
		t.Error("no answer after the cut ended")
	}
}
