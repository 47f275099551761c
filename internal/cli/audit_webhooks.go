package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/scalechat/scalechat/internal/webhook"
)

// webhookAudit is audit --webhooks: a backend's end of the cluster's
// webhooks (webhook.Receiver on a loopback port), checked after the run
// against what happened: every room the clients were in vacated once they
// all left (a killed node's after its lease ended), and, after dropping
// duplicates by id, no room occupied or vacated twice in a row.
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

// flags are the nodes' flags that send their webhooks here.
func (w *webhookAudit) flags() []string {
	return []string{"--webhook-url", "http://" + w.addr + "/", "--webhook-secret", w.secret}
}

// stop closes the receiver.
func (w *webhookAudit) stop() {
	_ = w.srv.Close()
	w.wg.Wait()
}

// check waits up to wait for every room to be vacated (the clients have
// all left), writes the verdict to out and reports whether a rule was
// broken. A run whose receiver got nothing is broken: it measured nothing.
func (w *webhookAudit) check(ctx context.Context, wait time.Duration, out io.Writer) bool {
	deadline := time.After(wait)
	waiting := true
	for waiting {
		changed := w.rcv.Changed()
		if len(w.rcv.View().Rooms) == 0 {
			break
		}
		select {
		case <-changed:
		case <-deadline:
			waiting = false
		case <-ctx.Done():
			waiting = false
		}
	}
	st, v := w.rcv.Stats(), w.rcv.View()
	occupied, vacated, resets := 0, 0, 0
	for _, e := range w.rcv.Events() {
		switch e.Name {
		case webhook.RoomOccupied:
			occupied++
		case webhook.RoomVacated:
			vacated++
		case webhook.Reset:
			resets++
		}
	}
	verdict := func(ok bool) string {
		if ok {
			return "held"
		}
		return "BROKEN"
	}
	fmt.Fprintf(out, "webhooks: %d events in %d requests (%d duplicates dropped by id), %d epochs; rooms occupied %d times, vacated %d times\n",
		st.Events, st.Requests, st.Duplicates, resets, occupied, vacated)
	nothing := st.Events == 0 || occupied == 0
	if nothing {
		fmt.Fprintln(out, "  BROKEN: no room occupied event arrived: the run measured nothing")
	}
	fmt.Fprintf(out, "  every request signed:                        %s (%d bad signatures)\n", verdict(st.BadSignatures == 0), st.BadSignatures)
	fmt.Fprintf(out, "  no transition twice in a row (per epoch):    %s\n", verdict(len(st.Violations) == 0))
	for i, s := range st.Violations {
		if i == 10 {
			fmt.Fprintf(out, "    … %d more\n", len(st.Violations)-10)
			break
		}
		fmt.Fprintln(out, "    "+s)
	}
	fmt.Fprintf(out, "  every room vacated once all clients left:    %s", verdict(len(v.Rooms) == 0))
	if len(v.Rooms) > 0 {
		fmt.Fprintf(out, " (still occupied after %s: %s)", wait, strings.Join(v.Rooms, ", "))
	}
	fmt.Fprintln(out)
	return nothing || st.BadSignatures > 0 || len(st.Violations) > 0 || len(v.Rooms) > 0
}
