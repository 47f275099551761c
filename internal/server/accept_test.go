//go:build linux

package server

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	gws "github.com/gobwas/ws"
	"golang.org/x/sys/unix"

	"github.com/scalechat/scalechat/internal/testsupport"
)

// upgradeHead is a well-formed upgrade request to path.
func upgradeHead(path string) string {
	return "GET " + path + " HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n" +
		"Sec-WebSocket-Protocol: scalechat.v1\r\n\r\n"
}

// rawUpgrade reads the answer to an upgrade written on c and returns a
// client of the connection once it switched.
func rawUpgrade(t *testing.T, c net.Conn) *client {
	t.Helper()
	br := bufio.NewReader(c)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("read the answer to the upgrade: %v", err)
	}
	_ = c.SetReadDeadline(time.Time{})
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade answered %s", resp.Status)
	}
	if got := resp.Header.Get("Sec-WebSocket-Accept"); got != "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" {
		t.Fatalf("Sec-WebSocket-Accept %q", got)
	}
	return &client{t: t, conn: c, r: br}
}

// An upgrade whose request arrives one byte per write, each its own TCP
// segment, is answered on the loop once the head is whole.
func TestAcceptUpgradeInTinyWrites(t *testing.T) {
	ts := startServer(t, nil)
	c := dialFrom(t, "127.0.0.1", ts.addr)
	c.(*net.TCPConn).SetNoDelay(true)
	for _, b := range []byte(upgradeHead("/ws/tiny")) {
		if _, err := c.Write([]byte{b}); err != nil {
			t.Fatal(err)
		}
	}
	cl := rawUpgrade(t, c)
	cl.joined()
	cl.sendJSON(msg("hello"))
	if m := cl.next(); m["text"] != "hello" {
		t.Errorf("got %v", m)
	}
	if st := ts.Stats(); st.AcceptedOnLoop != 1 || st.Accepted != 1 {
		t.Errorf("accepted %d, on a loop %d: want 1, 1", st.Accepted, st.AcceptedOnLoop)
	}
}

// A first frame in the same packet as the request is not lost: the loop
// hands the bytes after the head to the connection as its first input.
// The same holds when net/http answers the upgrade (admitBlocks), which
// gets the bytes through the hand-off and its hijack.
func TestAcceptPipelinedFrame(t *testing.T) {
	for _, blocking := range []bool{false, true} {
		t.Run(fmt.Sprintf("admission blocks %v", blocking), func(t *testing.T) {
			ts := startServerWith(t, nil, func(s *Server) { s.blockingAdmission = blocking })
			c := dialFrom(t, "127.0.0.1", ts.addr)
			frame := gws.MaskFrameInPlace(gws.NewTextFrame([]byte(`{"text":"first"}`)))
			var b strings.Builder
			b.WriteString(upgradeHead("/ws/pipe"))
			if err := gws.WriteFrame(&b, frame); err != nil {
				t.Fatal(err)
			}
			// A head and body larger than net/http's first read, so that
			// on its path part of the frame stays in the hand-off's prefix.
			pad := strings.Repeat("p", 5000)
			req := strings.Replace(b.String(), "Host: x\r\n", "Host: x\r\nX-Pad: "+pad+"\r\n", 1)
			if _, err := io.WriteString(c, req); err != nil {
				t.Fatal(err)
			}
			cl := rawUpgrade(t, c)
			cl.joined()
			if m := cl.next(); m["text"] != "first" {
				t.Errorf("got %v, want the frame sent with the request", m)
			}
			st := ts.Stats()
			want := uint64(1)
			if blocking {
				want = 0
			}
			if st.Accepted != 1 || st.AcceptedOnLoop != want {
				t.Errorf("accepted %d, on a loop %d: want 1, %d", st.Accepted, st.AcceptedOnLoop, want)
			}
		})
	}
}

// A head over net/http's limit on the loop's path is answered 431 and
// counted; one that stalls is cut at --handshake-timeout and counted; a
// client that leaves before its head ends is neither.
func TestAcceptHeadLimits(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.HandshakeTimeout = 300 * time.Millisecond })
	big := dialFrom(t, hostile, ts.addr)
	go fmt.Fprintf(big, "GET /ws/big HTTP/1.1\r\nHost: x\r\nX-Big: %s\r\n\r\n", strings.Repeat("a", 40<<10))
	slow := dialFrom(t, hostile, ts.addr)
	io.WriteString(slow, "GET /ws/slow HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n") // and never the blank line
	mute := dialFrom(t, hostile, ts.addr)                                              // not a byte
	res := readAnswers([]net.Conn{big, slow, mute}, nil)
	if res[0].status != http.StatusRequestHeaderFieldsTooLarge || res[1].status != 0 || res[2].status != 0 {
		t.Errorf("answers %+v, want 431, none (closed), none (closed)", res)
	}
	for i, r := range res[1:] {
		if r.after < 250*time.Millisecond || r.after > 5*time.Second {
			t.Errorf("handshake %d cut after %s, the timeout is 300ms", i+1, r.after)
		}
	}
	gone := dialFrom(t, hostile, ts.addr)
	io.WriteString(gone, "GET /ws/gone HTTP/1.1\r\nHost: x\r\n")
	testsupport.Eventually(t, 10*time.Second, "the partial head to be read", func() bool {
		return ts.Stats().HTTPConns == 1
	})
	gone.Close()
	testsupport.Eventually(t, 10*time.Second, "the connections to be given back", func() bool {
		return ts.Stats().HTTPConns == 0
	})
	st := ts.Stats()
	if st.Refused["header_too_large"] != 1 || st.Refused["handshake_timeout"] != 2 {
		t.Errorf("refused %v, want header_too_large 1, handshake_timeout 2", st.Refused)
	}
	// The server still upgrades.
	connect(t, ts, "after")
}

// Requests that are not WebSocket upgrades are served by net/http on the
// same port, keep-alive included, with the bytes the loop read first; an
// upgrade refused on the loop gets net/http's answer.
func TestAcceptHandsOtherRequestsToNetHTTP(t *testing.T) {
	ts := startServer(t, nil)
	c := dialFrom(t, "127.0.0.1", ts.addr)
	br := bufio.NewReader(c)
	for _, tt := range []struct {
		req    string
		status int
	}{
		{"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", http.StatusOK},
		{"GET /ws/plain HTTP/1.1\r\nHost: x\r\n\r\n", http.StatusUpgradeRequired}, // no Upgrade header: net/http's 426
		{"GET /ws/a/b HTTP/1.1\r\nHost: x\r\n\r\n", http.StatusBadRequest},
		{"POST /rooms/h/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 15\r\n\r\n{\"text\":\"post\"}", http.StatusAccepted},
		{"GET /rooms/h/messages?since=0 HTTP/1.1\r\nHost: x\r\n\r\n", http.StatusOK},
		{"GET / HTTP/1.1\r\nHost: x\r\n\r\n", http.StatusOK},
	} {
		if _, err := io.WriteString(c, tt.req); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%q: %v", tt.req, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.status {
			t.Errorf("%q: %s %q, want %d", tt.req, resp.Status, body, tt.status)
		}
		if strings.HasPrefix(tt.req, "GET /rooms/") && !strings.Contains(string(body), `"post"`) {
			t.Errorf("the poll did not return the message posted: %s", body)
		}
	}
	// Refused on the loop: the same status, header and text as net/http's.
	r := dialFrom(t, "127.0.0.1", ts.addr)
	io.WriteString(r, upgradeHead("/ws/bad!name"))
	rr := bufio.NewReader(r)
	resp, err := http.ReadResponse(rr, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadRequest || string(body) != roomNameRule+"\n" ||
		resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Errorf("bad room: %s %q %v", resp.Status, body, resp.Header)
	}
	st := ts.Stats()
	if st.Accepted != 0 || st.Refused["bad_request"] != 3 {
		t.Errorf("accepted %d, refused %v: want 0 and bad_request 3 (no Upgrade header, two segments, the bad room)", st.Accepted, st.Refused)
	}
}

func TestAcceptClassify(t *testing.T) {
	l := &loop{srv: &Server{cfg: Config{EchoEndpoint: true}}}
	for _, tt := range []struct {
		data string
		want headKind
	}{
		{"", headWait},
		{"G", headWait},
		{"GET /w", headWait},
		{"POST /ws", headOther},
		{"GET / HTTP/1.1\r\n", headOther},
		{"GET /healthz", headOther},
		{"GET /ws/a HTTP/1.1\r\nHost: x\r\n", headWait},
		{"GET /ws/a HTTP/1.1\r\nHost: x\r\n\r\n", headUpgrade},
		{"GET /ws/a HTTP/1.1\nHost: x\n\n", headUpgrade},
		{"GET /echo HTTP/1.1\r\n\r\n", headUpgrade},
		{"GET /wsx HTTP/1.1\r\n\r\n", headUpgrade}, // the route check sends it on to net/http
	} {
		if got, _ := l.classify([]byte(tt.data), 0); got != tt.want {
			t.Errorf("classify(%q) = %d, want %d", tt.data, got, tt.want)
		}
	}
	l.srv.cfg.EchoEndpoint = false
	if got, _ := l.classify([]byte("GET /echo HTTP/1.1\r\n\r\n"), 0); got != headOther {
		t.Errorf("/echo without the endpoint: %d, want headOther", got)
	}
}

func TestAcceptHeadEnd(t *testing.T) {
	for _, tt := range []struct {
		data string
		from int // bytes searched before
		want int
	}{
		{"GET / HTTP/1.1\r\n", 0, -1},
		{"GET / HTTP/1.1\r\n\r", 0, -1},
		{"GET / HTTP/1.1\r\n\r\n", 0, 18},
		{"GET / HTTP/1.1\r\n\r\nxyz", 0, 18},
		{"GET / HTTP/1.1\n\nxyz", 0, 16},
		{"GET / HTTP/1.1\r\nA: b\r\n\r\n", 0, 24},
		// Resumed where an earlier read stopped, in every cut of the end.
		{"GET / HTTP/1.1\r\nA: b\r\n\r\n", 22, 24},
		{"GET / HTTP/1.1\r\nA: b\r\n\r\n", 23, 24},
		{"GET / HTTP/1.1\nA: b\n\n", 19, 21},
		{"GET / HTTP/1.1\nA: b\n\n", 20, 21},
	} {
		if got := headEnd([]byte(tt.data), tt.from); got != tt.want {
			t.Errorf("headEnd(%q, %d) = %d, want %d", tt.data, tt.from, got, tt.want)
		}
	}
	// Every split of a head in two reads finds the same end.
	head := []byte(upgradeHead("/ws/split") + "rest")
	want := headEnd(head, 0)
	for cut := range len(head) {
		if got := headEnd(head[:cut], 0); got >= 0 && got != want {
			t.Fatalf("cut at %d: end %d in the first part, want %d or none", cut, got, want)
		}
		if got := headEnd(head, cut); got != want && headEnd(head[:cut], 0) < 0 {
			t.Fatalf("resumed at %d: end %d, want %d", cut, got, want)
		}
	}
}

func TestAcceptRoute(t *testing.T) {
	s := &Server{cfg: Config{EchoEndpoint: true}}
	for _, tt := range []struct {
		req  string
		room string
		ok   bool
	}{
		{upgradeHead("/ws"), "lobby", true},
		{upgradeHead("/ws/a.b"), "a.b", true},
		{upgradeHead("/ws/a%2Eb?since=3"), "a.b", true},
		{upgradeHead("/ws/a%2Fb"), "a/b", true}, // net/http's mux routes it so; the room check refuses it
		{upgradeHead("/echo"), "", true},
		{upgradeHead("/ws/"), "", false},
		{upgradeHead("/ws/a/b"), "", false},
		{upgradeHead("/ws/.."), "", false},
		{upgradeHead("/wsx"), "", false},
		{strings.Replace(upgradeHead("/ws/a"), "Upgrade: websocket\r\n", "", 1), "", false},
		{strings.Replace(upgradeHead("/ws/a"), "Host: x\r\n", "Host: x\r\nContent-Length: 3\r\n", 1), "", false},
		{strings.Replace(upgradeHead("/ws/a"), "GET", "HEAD", 1), "", false},
	} {
		r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(tt.req)))
		if err != nil {
			t.Fatalf("%q: %v", tt.req, err)
		}
		v := viewOfRequest(r)
		room, ok := s.loopRoute(&v)
		if room != tt.room || ok != tt.ok {
			t.Errorf("%s %s: %q %v, want %q %v", r.Method, r.URL, room, ok, tt.room, tt.ok)
		}
	}
}

// The server's end of a connection upgraded on a loop has Nagle's
// algorithm off, as Go's accepted connections do: otherwise a frame
// written behind another could wait for the client's delayed ACK.
func TestAcceptNoDelay(t *testing.T) {
	ts := startServer(t, nil)
	cl := connect(t, ts, "nodelay")
	local := cl.conn.LocalAddr().(*net.TCPAddr)
	fd := serverSocket(t, ts.addr, local.Port)
	v, err := unix.GetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY)
	if err != nil {
		t.Fatal(err)
	}
	if v == 0 {
		t.Error("TCP_NODELAY is off on the server's socket")
	}
	if st := ts.Stats(); st.AcceptedOnLoop != 1 {
		t.Errorf("accepted on a loop %d, want 1", st.AcceptedOnLoop)
	}
}

// serverSocket finds, among this process's descriptors, the server's end
// of the TCP connection from the client's port peerPort to addr.
func serverSocket(t *testing.T, addr string, peerPort int) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		sa, err := unix.Getsockname(fd)
		if err != nil {
			continue
		}
		pa, err := unix.Getpeername(fd)
		if err != nil {
			continue
		}
		s4, ok1 := sa.(*unix.SockaddrInet4)
		p4, ok2 := pa.(*unix.SockaddrInet4)
		if ok1 && ok2 && fmt.Sprintf("127.0.0.1:%d", s4.Port) == addr && p4.Port == peerPort {
			return fd
		}
	}
	t.Fatalf("no socket of this process serves the client at port %d", peerPort)
	return -1
}

// A loop whose accept fails for want of descriptors (EMFILE) pauses and
// accepts again once there are: the connections waiting meanwhile are
// upgraded, and the loop goes on. The clients are another process (this
// test's binary again), whose descriptors are its own.
func TestAcceptPausesWithoutDescriptors(t *testing.T) {
	if addr := os.Getenv("SCALECHAT_EMFILE_CLIENTS"); addr != "" {
		emfileClients(addr)
		return
	}
	ts := startServer(t, func(c *Config) { c.Loops = 1 })
	connect(t, ts, "before") // Serve has taken its descriptors
	cmd := exec.Command(os.Args[0], "-test.run", "^TestAcceptPausesWithoutDescriptors$")
	cmd.Env = append(os.Environ(), "SCALECHAT_EMFILE_CLIENTS="+ts.addr)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })

	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	restore := func() { _ = unix.Setrlimit(unix.RLIMIT_NOFILE, &old) }
	defer restore()
	// No descriptor left: the limit lowered to about what is open, the
	// rest filled.
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: uint64(len(ents) + 8), Max: old.Max}); err != nil {
		t.Fatal(err)
	}
	var fill []int
	defer func() {
		for _, fd := range fill {
			unix.Close(fd)
		}
	}()
	for {
		fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			if !errors.Is(err, unix.EMFILE) {
				t.Fatal(err)
			}
			break
		}
		fill = append(fill, fd)
	}
	if _, err := io.WriteString(stdin, "go\n"); err != nil { // the clients connect
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // a few of the loop's 50 ms pauses go by
	if n := ts.Stats().Accepted; n != 1 {
		t.Errorf("%d upgrades with no descriptor to spare", n-1)
	}
	restore()
	select {
	case err := <-done:
		if err != nil || !strings.Contains(out.String(), "3 upgraded") {
			t.Fatalf("clients: %v\n%s", err, out.String())
		}
		done <- nil
	case <-time.After(20 * time.Second):
		t.Fatalf("the clients were not upgraded after the limit came back:\n%s", out.String())
	}
	if n := ts.Stats().AcceptedOnLoop; n != 4 {
		t.Errorf("accepted on the loop %d, want 4", n)
	}
	connect(t, ts, "after")
}

// emfileClients is TestAcceptPausesWithoutDescriptors's client process: on
// a line from stdin it connects three clients to addr, sends their upgrade
// requests and reports how many got their 101.
func emfileClients(addr string) {
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		fmt.Println("stdin:", err)
		os.Exit(1)
	}
	var cs []net.Conn
	for range 3 {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			fmt.Println("dial:", err)
			os.Exit(1)
		}
		io.WriteString(c, upgradeHead("/ws/emfile"))
		cs = append(cs, c)
	}
	n := 0
	for _, c := range cs {
		_ = c.SetReadDeadline(time.Now().Add(15 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err == nil && resp.StatusCode == http.StatusSwitchingProtocols {
			n++
		}
	}
	fmt.Printf("%d upgraded\n", n)
	os.Exit(0)
}
