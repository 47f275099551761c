//go:build linux

package metrics

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/scalechat/scalechat/internal/server"
	"github.com/scalechat/scalechat/internal/testsupport"
)

// TestDashboardShowsLiveFigures opens /dashboard in headless Chromium and
// watches its figures follow a load: connections, a message rate that keeps
// changing, a drawn chart, and the rate falling back to zero after the load.
func TestDashboardShowsLiveFigures(t *testing.T) {
	ctx := testsupport.NewBrowser(t, 2*time.Minute)
	n := startNode(t, func(c *server.Config) { c.RateLimit, c.RateBurst = 1000, 1000 },
		Options{Node: "node-1", Interval: 250 * time.Millisecond})

	if err := chromedp.Do(ctx, chromedp.Navigate("http://"+n.metricsAddr+"/dashboard")); err != nil {
		t.Fatal(err)
	}
	const cell = `((k) => { const td = document.querySelector('tr[data-node="node-1"] td[data-k="' + k + '"]'); return td ? td.textContent : null; })`
	poll := func(what, expr string) any {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Poll[any](expr,
			chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(30*time.Second)))
		if err != nil {
			text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
			t.Fatalf("%s: %v\npage:\n%s", what, err, text)
		}
		return v
	}
	poll("idle node shown", cell+`("connections") === "0" && `+cell+`("in_per_s") === "0.0"`)

	// Load: 4 clients of one room, each sending every 10 ms, for at most 30 s.
	const clients = 4
	var conns []*wsClient
	for range clients {
		conns = append(conns, join(t, n.chatAddr, "dash"))
	}
	loadCtx, stopLoad := context.WithTimeout(context.Background(), 30*time.Second)
	defer stopLoad()
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Go(func() { // drain what the room sends back
			for {
				if _, err := c.readFrame(); err != nil {
					return
				}
			}
		})
		wg.Go(func() {
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			for j := 0; ; j++ {
				select {
				case <-loadCtx.Done():
					return
				case <-tick.C:
				}
				if _, err := c.conn.Write(maskedFrame(fmt.Sprintf(`{"text":"%d-%d"}`, i, j))); err != nil {
					return
				}
			}
		})
	}

	poll("connections shown", cell+fmt.Sprintf(`("connections") === "%d"`, clients))
	// The message rate is positive and changes from one update to the next.
	seen := poll("changing message rate", `(() => {
		const v = `+cell+`("in_per_s");
		window.seenRates = window.seenRates || new Set();
		if (v && parseFloat(v.replace(/,/g, "")) > 0) window.seenRates.add(v);
		return window.seenRates.size >= 3 ? [...window.seenRates] : null;
	})()`)
	t.Logf("message rates seen: %v", seen)
	poll("deliveries and processing time shown", `(() => {
		const out = parseFloat((`+cell+`("out_per_s") || "").replace(/,/g, ""));
		const p99 = parseFloat(`+cell+`("p99_ms"));
		const cpu = parseFloat(`+cell+`("cpu"));
		const rss = parseFloat(`+cell+`("rss_bytes"));
		return out > 0 && p99 > 0 && cpu >= 0 && rss > 1;
	})()`)
	// The "Messages per second" chart has drawn its line (the first
	// series' colour, #2563eb) into its canvas.
	poll("message chart drawn", `(() => {
		const fig = [...document.querySelectorAll("figure")].find(f => f.textContent.startsWith("Messages per second"));
		const cv = fig && fig.querySelector("canvas");
		if (!cv || !cv.width) return false;
		const d = cv.getContext("2d").getImageData(0, 0, cv.width, cv.height).data;
		let n = 0;
		for (let i = 0; i < d.length; i += 4) if (d[i] < 80 && d[i+1] > 70 && d[i+1] < 130 && d[i+2] > 200) n++;
		return n > 20;
	})()`)
	if status, err := chromedp.Run(ctx, chromedp.Text("#status")); err != nil || !strings.HasPrefix(status, "live") {
		t.Errorf("status %q, %v", status, err)
	}

	// Load over, clients gone: the figures come back down.
	stopLoad()
	for _, c := range conns {
		c.conn.Close()
	}
	wg.Wait()
	poll("figures back to idle", cell+`("connections") === "0" && `+cell+`("in_per_s") === "0.0"`)
}

// maskedFrame returns a client text frame holding s.
func maskedFrame(s string) []byte {
	key := [4]byte{1, 2, 3, 4}
	f := []byte{0x81, 0x80 | byte(len(s))}
	f = append(f, key[:]...)
	for i := range len(s) {
		f = append(f, s[i]^key[i%4])
	}
	return f
}
