package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/scalechat/scalechat/internal/webhook"
)

// webhookAudit is audit --webhooks: a backend's end of the cluster's
// webhooks (webhook.Receiver on a loopback port), checked after the run
// against what happened. The clients are users (?name=) and the nodes send
// message_published: after dropping duplicates by id, no room, member or
// user transition twice in a row; every room vacated, every member left and
// every user offline once they all left (a killed node's after its lease
// ended); a message_published for every message the clients received,
// unless a fault lost the events not yet in Redis (a node killed, Redis
// restarted), where the count is reported.
type webhookAudit struct {
	rcv    *webhook.Receiver
	srv    *http.Server
	addr   string
	secret string
	wg     sync.WaitGroup
}

// startWebhookAudit listens on loopback for the nodes' webhooks.
func startWebhookAudit() (*webhookAudit, error) {
	var key [16]byte
	_, _ = rand.Read(key[:]) // crypto/rand.Read never fails (Go 1.24+)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for webhooks: %w", err)
	}
	w := &webhookAudit{secret: hex.EncodeToString(key[:]), addr: ln.Addr().String()}
	w.rcv = webhook.NewReceiver([]byte(w.secret))
	w.srv = &http.Server{Handler: w.rcv, ReadHeaderTimeout: 5 * time.Second}
	w.wg.Go(func() { _ = w.srv.Serve(ln) })
	return w, nil
}

// flags are the nodes' flags that send their webhooks here, messages
// included.
func (w *webhookAudit) flags() []string {
	return []string{"--webhook-url", "http://" + w.addr + "/", "--webhook-secret", w.secret, "--webhook-publish"}
}

// stop closes the receiver.
func (w *webhookAudit) stop() {
	_ = w.srv.Close()
	w.wg.Wait()
}

// check waits up to wait for every room to be vacated and every user to
// go offline (the clients have all left), writes the verdict to out and
// reports whether a rule was broken. accepted names the messages the
// clients received ("sender/message_id"); lossy says a fault may have lost
// events not yet in Redis, so a missing message_published is reported, not
// judged. A run whose receiver got nothing is broken: it measured nothing.
func (w *webhookAudit) check(ctx context.Context, wait time.Duration, out io.Writer, accepted []string, lossy bool) bool {
	w.waitEmpty(ctx, wait)
	st, v := w.rcv.Stats(), w.rcv.View()
	n := w.count(accepted)
	verdict := func(ok bool) string {
		if ok {
			return "held"
		}
		return "BROKEN"
	}
	fmt.Fprintf(out, "webhooks: %d events in %d requests (%d duplicates dropped by id), %d epochs, %d gaps; rooms occupied %d times, vacated %d; users online %d times, offline %d; %d messages published\n",
		st.Events, st.Requests, st.Duplicates, n.resets, st.Gaps, n.occupied, n.vacated, n.online, n.offline, n.published)
	nothing := st.Events == 0 || n.occupied == 0 || n.online == 0
	if nothing {
		fmt.Fprintln(out, "  BROKEN: no room occupied or user online event arrived: the run measured nothing")
	}
	fmt.Fprintf(out, "  every request signed:                        %s (%d bad signatures, %d stale)\n", verdict(st.BadSignatures == 0 && st.Stale == 0), st.BadSignatures, st.Stale)
	fmt.Fprintf(out, "  no transition twice in a row (per epoch):    %s\n", verdict(len(st.Violations) == 0))
	for i, s := range st.Violations {
		if i == 10 {
			fmt.Fprintf(out, "    … %d more\n", len(st.Violations)-10)
			break
		}
		fmt.Fprintln(out, "    "+s)
	}
	left := len(v.Rooms) == 0 && len(v.Users) == 0 && len(v.Members) == 0
	fmt.Fprintf(out, "  every room vacated, user offline at the end: %s", verdict(left))
	if !left {
		fmt.Fprintf(out, " (after %s: rooms %s; users %s)", wait, strings.Join(v.Rooms, ", "), strings.Join(v.Users, ", "))
	}
	fmt.Fprintln(out)
	missing := len(accepted) - n.matched
	fmt.Fprintf(out, "  message_published for every message:         ")
	switch {
	case missing == 0:
		fmt.Fprintf(out, "held (%d of %d)\n", n.matched, len(accepted))
	case lossy:
		fmt.Fprintf(out, "reported: %d of %d (a node killed or Redis restarted loses the events not yet in Redis)\n", n.matched, len(accepted))
	default:
		fmt.Fprintf(out, "BROKEN: %d of %d\n", n.matched, len(accepted))
	}
	return nothing || st.BadSignatures > 0 || st.Stale > 0 || len(st.Violations) > 0 || !left || missing > 0 && !lossy
}

// waitEmpty waits up to wait for the receiver to believe nobody is anywhere.
func (w *webhookAudit) waitEmpty(ctx context.Context, wait time.Duration) {
	deadline := time.After(wait)
	for {
		changed := w.rcv.Changed()
		if v := w.rcv.View(); len(v.Rooms) == 0 && len(v.Users) == 0 {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			return
		case <-ctx.Done():
			return
		}
	}
}

// eventCounts are the receiver's events by kind, and how many of the
// accepted messages have a message_published.
type eventCounts struct {
	occupied, vacated, online, offline, resets, published, matched int
}

func (w *webhookAudit) count(accepted []string) eventCounts {
	var n eventCounts
	got := map[string]bool{}
	for _, e := range w.rcv.Events() {
		switch e.Name {
		case webhook.RoomOccupied:
			n.occupied++
		case webhook.RoomVacated:
			n.vacated++
		case webhook.UserOnline:
			n.online++
		case webhook.UserOffline:
			n.offline++
		case webhook.Reset:
			n.resets++
		case webhook.MessagePublished:
			n.published++
			var m struct {
				Sender string `json:"sender"`
				ID     uint64 `json:"message_id"`
			}
			if json.Unmarshal(e.Message, &m) == nil {
				got[m.Sender+"/"+strconv.FormatUint(m.ID, 10)] = true
			}
		}
	}
	for _, k := range accepted {
		if got[k] {
			n.matched++
		}
	}
	return n
}
