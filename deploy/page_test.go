//go:build linux

package deploy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/scalechat/scalechat/client"

	"github.com/scalechat/scalechat/internal/testsupport"
)

// The browser page (internal/webui) and the clients of every kind, against
// real clusters: the page in headless Chromium, the Go client of
// github.com/scalechat/scalechat/client and the JavaScript client of
// clients/js in Node.

// pageRow is a message as the page shows it.
type pageRow struct {
	Seq    int    `json:"seq"`
	Sender string `json:"sender"`
	Text   string `json:"text"`
}

func pageEval[T any](t *testing.T, tab context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(tab, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// pageWait waits until expr is truthy on the page, checking again at each
// change of its DOM.
func pageWait(t *testing.T, tab context.Context, timeout time.Duration, expr string) {
	t.Helper()
	if err := testsupport.WaitJS(tab, timeout, expr); err != nil {
		state, _ := chromedp.Run(tab, chromedp.Evaluate[string](`document.getElementById('state')?.textContent ?? ''`))
		log, _ := chromedp.Run(tab, chromedp.Evaluate[string](`document.getElementById('messages')?.innerText.slice(-2000) ?? ''`))
		page, _ := chromedp.Run(tab, chromedp.Evaluate[string](`location.href + ' ' + document.readyState + ': ' + (document.body?.innerText ?? '').slice(0, 300)`))
		t.Fatalf("waiting for %s: %v (state %q, page %q, messages:\n%s)", expr, err, state, page, log)
	}
}

// roomRows returns the messages the page holds for room, shown or not.
func roomRows(t *testing.T, tab context.Context, room string) []pageRow {
	t.Helper()
	return pageEval[[]pageRow](t, tab, fmt.Sprintf(`[...document.querySelectorAll('ol[data-room=%q] li.msg')].map(li => ({
		seq: Number(li.dataset.seq), sender: li.querySelector('.sender').textContent, text: li.querySelector('.text').textContent}))`, room))
}

// openPage loads url in a new browser, names the user and waits until the
// page is connected and shows the people of its room, the user among them.
func openPage(t *testing.T, url, name string) context.Context {
	t.Helper()
	tab := testsupport.NewBrowser(t, 3*time.Minute)
	testsupport.BrowserDo(t, tab, chromedp.Navigate(url))
	// Until the page is there: a predicate that throws ends the wait.
	pageWait(t, tab, 30*time.Second, `document.getElementById('state')?.dataset.state === 'connected'`)
	testsupport.BrowserDo(t, tab, chromedp.SetValue(chromedp.ID("name"), name))
	pageEval[bool](t, tab, `document.getElementById('name').dispatchEvent(new Event('change')), true`)
	pageWait(t, tab, 30*time.Second, fmt.Sprintf(`document.querySelector('#people li[data-user=%q]') !== null`, name))
	return tab
}

func pageSay(t *testing.T, tab context.Context, text string) {
	t.Helper()
	testsupport.BrowserDo(t, tab, chromedp.SendKeys(chromedp.ID("text"), text+"\n"))
}

func pageShow(t *testing.T, tab context.Context, room string) {
	t.Helper()
	testsupport.BrowserDo(t, tab, chromedp.Click(chromedp.CSS(fmt.Sprintf(`#rooms li[data-room=%q] button`, room))))
	pageWait(t, tab, 10*time.Second, fmt.Sprintf(`document.getElementById('room-title').textContent === %q`, room))
}

func unread(t *testing.T, tab context.Context, room string) string {
	t.Helper()
	return pageEval[string](t, tab, fmt.Sprintf(`(b => b.hidden ? '' : b.textContent)(document.querySelector('#rooms li[data-room=%q] .unread'))`, room))
}

// postHTTP posts a chat message through the load balancer, trying again
// while a node is restarting, and returns once one was accepted.
func postHTTP(t *testing.T, base, room, text string) {
	t.Helper()
	body := fmt.Sprintf(`{"text":%q,"sender":"poster"}`, text)
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Post(base+"/rooms/"+room+"/messages", "application/json", strings.NewReader(body))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusAccepted {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("post %q into %s: %v %v", text, room, err, resp)
		}
		time.Sleep(50 * time.Millisecond) // paces the retries; nothing to wait on
	}
}

// TestPageRoomsAcrossACluster puts two pages behind HAProxy in front of two
// nodes: three rooms each, unread counts, who is in a room, join notices,
// earlier messages on scroll back, a screenshot checked for what it must
// show, and a restart of each node while messages keep coming, after which
// each page holds every message of every room once, in order.
func TestPageRoomsAcrossACluster(t *testing.T) {
	c := startHAProxyCluster(t, 2)
	base := "http://" + c.lb.Addr
	for i := 1; i <= 50; i++ {
		postHTTP(t, base, "r3", fmt.Sprintf("old %d", i))
	}

	alice := openPage(t, base+"/#r1,r2,r3", "alice")
	bob := openPage(t, base+"/#r2,r1,r3", "bob")
	if got := pageEval[[]string](t, alice, `[...document.querySelectorAll('#rooms li')].map(li => li.dataset.room)`); strings.Join(got, ",") != "r1,r2,r3" {
		t.Errorf("alice's rooms %v", got)
	}
	// Who is in the room, on both nodes, and who came.
	pageWait(t, alice, 20*time.Second, `document.querySelector('#people li[data-user="bob"]') !== null`)
	pageWait(t, alice, 20*time.Second, `[...document.querySelectorAll('ol[data-room="r1"] li.notice.join')].some(li => li.textContent === 'bob joined')`)
	if got := pageEval[string](t, alice, `document.getElementById('members').textContent`); got != "2 members" {
		t.Errorf("alice's r1 has %q", got)
	}

	// A message in a room not shown is counted unread; the history is not.
	pageSay(t, alice, "hi from alice")
	pageWait(t, bob, 20*time.Second, `document.querySelector('#rooms li[data-room="r1"] .unread').textContent === '1'`)
	pageSay(t, bob, "hi from bob")
	pageWait(t, alice, 20*time.Second, `document.querySelector('#rooms li[data-room="r2"] .unread').textContent === '1'`)
	if u := unread(t, alice, "r3"); u != "" {
		t.Errorf("r3's history counted as %s unread", u)
	}
	checkScreenshot(t, alice)

	pageShow(t, bob, "r1")
	if u := unread(t, bob, "r1"); u != "" {
		t.Errorf("r1 still shows %s unread once shown", u)
	}
	if got := roomRows(t, bob, "r1"); len(got) != 1 || got[0].Text != "hi from alice" || got[0].Sender != "alice" {
		t.Errorf("bob's r1 shows %+v", got)
	}

	// The last 30 of r3's history at first; the rest on scrolling back.
	pageShow(t, alice, "r3")
	if got := roomRows(t, alice, "r3"); len(got) != 30 || got[0].Seq != 21 || got[29].Seq != 50 {
		t.Fatalf("r3 shows %d messages first (%+v…), want 21..50", len(got), got[:min(len(got), 1)])
	}
	pageEval[bool](t, alice, `document.getElementById('scroller').scrollTop = 0, true`)
	pageWait(t, alice, 20*time.Second, `document.querySelectorAll('ol[data-room="r3"] li.msg').length === 50`)
	for i, r := range roomRows(t, alice, "r3") {
		if r.Seq != i+1 || r.Text != fmt.Sprintf("old %d", i+1) {
			t.Fatalf("r3 row %d after scrolling back: %+v", i, r)
		}
	}

	// Every node restarts in turn while messages keep coming.
	posted := map[string][]string{}
	post := func(n int) {
		for range n {
			room := []string{"r1", "r2", "r3"}[(len(posted["r1"])+len(posted["r2"])+len(posted["r3"]))%3]
			text := fmt.Sprintf("%s live %d", room, len(posted[room])+1)
			postHTTP(t, base, room, text)
			posted[room] = append(posted[room], text)
		}
	}
	post(6)
	for i, n := range c.nodes {
		if err := n.Terminate(15 * time.Second); err != nil {
			t.Fatal(err)
		}
		post(9)
		c.nodes[i] = restartNode(t, c, i)
		post(6)
	}
	post(6)
	for _, tab := range []context.Context{alice, bob} {
		for room, texts := range posted {
			want := texts[len(texts)-1]
			pageWait(t, tab, 30*time.Second, fmt.Sprintf(`[...document.querySelectorAll('ol[data-room=%q] li.msg .text')].some(e => e.textContent === %q)`, room, want))
			rows := roomRows(t, tab, room)
			var live []string
			for i, r := range rows {
				if i > 0 && r.Seq != rows[i-1].Seq+1 {
					t.Errorf("room %s: seq %d follows %d", room, r.Seq, rows[i-1].Seq)
				}
				if strings.Contains(r.Text, " live ") {
					live = append(live, r.Text)
				}
			}
			if strings.Join(live, "|") != strings.Join(texts, "|") {
				t.Errorf("room %s shows the live messages\n %v\nwant\n %v", room, live, texts)
			}
		}
		if s := pageEval[string](t, tab, `document.getElementById('state').dataset.state`); s != "connected" {
			t.Errorf("state %q after the restarts", s)
		}
	}
}

// restartNode starts node i of c again on its address, as startNodes did.
func restartNode(t *testing.T, c *cluster, i int) *testsupport.Node {
	t.Helper()
	n := testsupport.StartNodeAt(t, bin, fmt.Sprintf("node%d", i+1), c.nodes[i].Addr,
		"--redis", c.redis.URL(), "--history", "1000", "--rate-limit", "1000", "--rate-burst", "1000",
		"--shutdown-timeout", "5s")
	c.lb.WaitServers(t, len(c.nodes), 20*time.Second)
	return n
}

// checkScreenshot takes a screenshot of the page and checks that the
// elements a person needs are drawn where the page says they are: three
// rooms in the side list with an unread badge in the accent colour, the
// people of the room, the messages, and a green connection dot.
func checkScreenshot(t *testing.T, tab context.Context) {
	t.Helper()
	shot, err := chromedp.Run(tab, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	if dir := os.Getenv("SCALECHAT_SCREENSHOTS"); dir != "" {
		_ = os.WriteFile(filepath.Join(dir, t.Name()+".png"), shot, 0o644) // for a person to look at
	}
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("the screenshot is not a PNG: %v", err)
	}
	type box struct{ X, Y, W, H float64 }
	boxes := pageEval[map[string][]box](t, tab, `(() => {
		const r = (sel) => [...document.querySelectorAll(sel)].filter(e => !e.hidden && e.offsetParent !== null)
			.map(e => { const b = e.getBoundingClientRect(); return {x: b.x, y: b.y, w: b.width, h: b.height}; });
		return {rooms: r('#rooms li'), badge: r('#rooms .unread'), people: r('#people li'),
			messages: r('#messages li.msg'), shown: r('#messages ol:not([hidden]) li.msg'),
			state: r('#state'), send: r('#send-button')};
	})()`)
	scale := float64(img.Bounds().Dx()) / pageEval[float64](t, tab, `window.innerWidth`)
	// colours counts the pixels of b close to one of want, and the distinct
	// colours it holds.
	colours := func(b box, want ...[3]int) (near, distinct int) {
		seen := map[[3]uint32]bool{}
		for y := int(b.Y * scale); y < int((b.Y+b.H)*scale); y++ {
			for x := int(b.X * scale); x < int((b.X+b.W)*scale); x++ {
				r, g, bl, _ := img.At(x, y).RGBA()
				c := [3]uint32{r >> 8, g >> 8, bl >> 8}
				seen[c] = true
				for _, w := range want {
					if absDiff(c[0], w[0])+absDiff(c[1], w[1])+absDiff(c[2], w[2]) < 40 {
						near++
					}
				}
			}
		}
		return near, len(seen)
	}
	inView := func(name string, b box) {
		if b.W < 4 || b.H < 4 || b.X < 0 || b.Y < 0 || (b.X+b.W)*scale > float64(img.Bounds().Dx())+1 || (b.Y+b.H)*scale > float64(img.Bounds().Dy())+1 {
			t.Errorf("%s at %+v is not within the %v screenshot", name, b, img.Bounds().Size())
		}
		if _, n := colours(b); n < 3 {
			t.Errorf("%s at %+v is blank in the screenshot (%d colours)", name, b, n)
		}
	}
	for name, want := range map[string]int{"rooms": 3, "badge": 1, "people": 2, "state": 1, "send": 1} {
		if len(boxes[name]) != want {
			t.Errorf("the page shows %d %s, want %d", len(boxes[name]), name, want)
		}
	}
	if len(boxes["messages"]) == 0 || len(boxes["messages"]) != len(boxes["shown"]) {
		t.Errorf("the page draws %d messages, %d of them of the room shown: want only those, and some", len(boxes["messages"]), len(boxes["shown"]))
	}
	for name, bs := range boxes {
		for _, b := range bs {
			inView(name, b)
		}
	}
	accent := [][3]int{{0x2f, 0x6f, 0xed}, {0x6f, 0x9b, 0xff}} // light and dark scheme
	for _, b := range boxes["badge"] {
		if n, _ := colours(b, accent...); float64(n) < b.W*b.H*scale*scale/4 {
			t.Errorf("the unread badge at %+v has %d pixels of the accent colour", b, n)
		}
	}
	for _, b := range boxes["state"] {
		if n, _ := colours(b, [3]int{0x1f, 0x9d, 0x55}); n < 10 {
			t.Errorf("the connection state at %+v has no green dot (%d pixels)", b, n)
		}
	}
}

func absDiff(a uint32, b int) int {
	d := int(a) - b
	if d < 0 {
		return -d
	}
	return d
}

// TestAPIPublishReachesEveryKindOfClient publishes through the server API
// of one node and checks that the message, with the seq the API answered,
// reaches a browser page, a Go client and a JavaScript client of the room
// on two nodes; then disconnects the JavaScript client's user through the
// other node's API.
func TestAPIPublishReachesEveryKindOfClient(t *testing.T) {
	redis := testsupport.StartRedis(t)
	const key = "integration-api-key-0123"
	var nodes []*testsupport.Node
	for i := range 2 {
		nodes = append(nodes, testsupport.StartNode(t, bin, fmt.Sprintf("node%d", i+1), "--redis", redis.URL(), "--api-key", key))
	}
	page := openPage(t, "http://"+nodes[0].Addr+"/#news", "pat")
	goc, err := client.Dial(context.Background(), client.Config{URL: nodes[1].URL("/ws"), Room: "news", Sender: "gopher"})
	if err != nil {
		t.Fatal(err)
	}
	defer goc.Close()
	js := testsupport.StartJSClient(t, "ws://"+nodes[1].Addr, "jay", "news")

	req, _ := http.NewRequest("POST", "http://"+nodes[0].Addr+"/api/rooms/news/publish", strings.NewReader(`{"text":"breaking","sender":"newsroom"}`))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var pub struct{ Seq uint64 }
	err = json.NewDecoder(resp.Body).Decode(&pub)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || pub.Seq == 0 {
		t.Fatalf("publish: %d, %+v, %v", resp.StatusCode, pub, err)
	}

	pageWait(t, page, 20*time.Second, `[...document.querySelectorAll('ol[data-room="news"] li.msg .text')].some(e => e.textContent === 'breaking')`)
	for _, r := range roomRows(t, page, "news") {
		if r.Text == "breaking" && (r.Seq != int(pub.Seq) || r.Sender != "newsroom") {
			t.Errorf("the page shows %+v, want seq %d from newsroom", r, pub.Seq)
		}
	}
	for got := false; !got; {
		select {
		case ev := <-goc.Events():
			if m, ok := ev.(*client.Message); ok && m.Text == "breaking" {
				got = true
				if m.Seq != pub.Seq || m.Sender != "newsroom" {
					t.Errorf("the Go client got %+v, want seq %d", m, pub.Seq)
				}
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the Go client did not get the message")
		}
	}
	for {
		e, err := js.Next("message", 20*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			Seq          uint64
			Text, Sender string
		}
		if err := json.Unmarshal(e.Data, &m); err != nil {
			t.Fatal(err)
		}
		if m.Text == "breaking" {
			if m.Seq != pub.Seq || m.Sender != "newsroom" {
				t.Errorf("the JavaScript client got %+v, want seq %d", m, pub.Seq)
			}
			break
		}
	}

	req, _ = http.NewRequest("POST", "http://"+nodes[0].Addr+"/api/users/jay/disconnect", strings.NewReader(`{"reason":"bye jay"}`))
	req.Header.Set("X-API-Key", key)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("disconnect jay: %v %v", resp, err)
	}
	e, err := js.Next("disconnect", 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Code      int
		Reason    string
		Reconnect bool
	}
	if err := json.Unmarshal(e.Data, &d); err != nil || d.Code != 4001 || d.Reason != "bye jay" || d.Reconnect {
		t.Errorf("the JavaScript client's disconnect: %s (%v), want 4001 without reconnecting", e.Data, err)
	}
}
