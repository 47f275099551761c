// Command hookbackend is an example of the application's backend that
// scalechat's hooks call (docs/hooks.md), in the standard library only:
//
//   - connect: refuses the users named in -banned (403, with a reason the
//     client sees), names everyone else by the ?name= they gave (or
//     "guest-<n>"), and hands scalechat a little data that comes back in
//     their join and publish calls;
//   - join: lets only the users of -admins into rooms whose name starts
//     with "staff";
//   - publish: refuses messages holding a word of -blocked, and replaces
//     each word of -masked in the text with stars.
//
// Every request's signature is checked against the shared secret
// (SCALECHAT_HOOK_SECRET, the same variable scalechat serve reads), and a
// request older than a minute is refused as a replay.
//
// Run it beside scalechat (two terminals, or put the first in the
// background):
//
//	SCALECHAT_HOOK_SECRET=change-me-to-16-bytes-or-more go run ./examples/hookbackend
//	SCALECHAT_HOOK_SECRET=change-me-to-16-bytes-or-more go run ./cmd/scalechat serve \
//	  --hook-connect http://127.0.0.1:9090/connect --hook-join http://127.0.0.1:9090/join \
//	  --hook-publish http://127.0.0.1:9090/publish
//
// then open http://127.0.0.1:8080/ and post "darn" or "spam", or connect
// as mallory.
package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9090", "address to listen on")
	banned := flag.String("banned", "mallory", "comma-separated users refused at connect")
	admins := flag.String("admins", "alice", "comma-separated users who may join rooms whose name starts with staff")
	blocked := flag.String("blocked", "spam", "comma-separated words that get a message refused")
	masked := flag.String("masked", "darn,heck", "comma-separated words replaced with stars")
	flag.Parse()
	secret := os.Getenv("SCALECHAT_HOOK_SECRET")
	if len(secret) < 16 {
		fmt.Fprintln(os.Stderr, "hookbackend: set SCALECHAT_HOOK_SECRET to the secret of scalechat serve (at least 16 bytes)")
		os.Exit(2)
	}
	b := &Backend{Secret: secret, Banned: list(*banned), Admins: list(*admins), Blocked: list(*blocked), Masked: list(*masked),
		Log: slog.New(slog.NewTextHandler(os.Stderr, nil))}
	srv := &http.Server{Addr: *addr, Handler: b.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		stop := make(chan os.Signal, 1)
		signal.Notify(stop, os.Interrupt)
		<-stop
		srv.Close()
	}()
	b.Log.Info("hookbackend listening", "hooks", "http://"+*addr+"/{connect,join,publish}")
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(os.Stderr, "hookbackend:", err)
		os.Exit(1)
	}
}

func list(s string) []string {
	var out []string
	for w := range strings.SplitSeq(s, ",") {
		if w = strings.TrimSpace(w); w != "" {
			out = append(out, w)
		}
	}
	return out
}

// Backend decides for scalechat's hooks.
type Backend struct {
	Secret                          string
	Banned, Admins, Blocked, Masked []string
	Log                             *slog.Logger
	guests                          atomic.Int64
}

// Handler serves the three hooks.
func (b *Backend) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /connect", b.hook(b.connect))
	mux.HandleFunc("POST /join", b.hook(b.join))
	mux.HandleFunc("POST /publish", b.hook(b.publish))
	return mux
}

// request is what every hook's request carries; each hook reads its own
// fields.
type request struct {
	Hook       string          `json:"hook"`
	Node       string          `json:"node"`
	Time       int64           `json:"time"` // Unix milliseconds
	Connection string          `json:"connection"`
	User       string          `json:"user"`
	Name       string          `json:"name"`
	Remote     string          `json:"remote"`
	Room       string          `json:"room"`
	Message    json.RawMessage `json:"message"`
	Data       json.RawMessage `json:"data"`
}

// hook checks a request's signature and age, then answers with decide's
// JSON.
func (b *Backend) hook(decide func(*request) any) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "cannot read the body", http.StatusBadRequest)
			return
		}
		mac := hmac.New(sha256.New, []byte(b.Secret))
		mac.Write(body)
		want := "sha256=" + hex.EncodeToString(mac.Sum(nil))
		if !hmac.Equal([]byte(want), []byte(r.Header.Get("X-Scalechat-Signature"))) {
			http.Error(w, "bad signature", http.StatusUnauthorized) // scalechat counts it as an error
			return
		}
		var req request
		if err := json.Unmarshal(body, &req); err != nil {
			http.Error(w, "not JSON", http.StatusBadRequest)
			return
		}
		if age := time.Since(time.UnixMilli(req.Time)); age > time.Minute || age < -time.Minute {
			http.Error(w, "stale request", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if err := json.NewEncoder(w).Encode(decide(&req)); err != nil {
			b.Log.Warn("answer", "err", err)
		}
	}
}

func (b *Backend) connect(req *request) any {
	user := req.User // a token's subject, when scalechat checks tokens
	if user == "" {
		user = req.Name
	}
	if slices.Contains(b.Banned, user) {
		b.Log.Info("connect refused", "user", user, "remote", req.Remote)
		return map[string]any{"allow": false, "status": 403, "reason": user + " is banned from this chat"}
	}
	if user == "" {
		user = fmt.Sprintf("guest-%d", b.guests.Add(1))
	}
	return map[string]any{"allow": true, "user": user, "data": map[string]any{"since": time.Now().UTC().Format(time.RFC3339)}}
}

func (b *Backend) join(req *request) any {
	if strings.HasPrefix(req.Room, "staff") && !slices.Contains(b.Admins, req.User) {
		return map[string]any{"allow": false, "reason": "the staff rooms are for staff"}
	}
	return map[string]any{"allow": true}
}

func (b *Backend) publish(req *request) any {
	var msg map[string]any
	if err := json.Unmarshal(req.Message, &msg); err != nil {
		return map[string]any{"allow": false, "reason": "the message is not a JSON object"}
	}
	text, _ := msg["text"].(string)
	lower := strings.ToLower(text)
	for _, w := range b.Blocked {
		if strings.Contains(lower, strings.ToLower(w)) {
			return map[string]any{"allow": false, "reason": fmt.Sprintf("messages about %s are not allowed here", w)}
		}
	}
	masked := text
	for _, w := range b.Masked {
		masked = replaceFold(masked, w, strings.Repeat("*", len(w)))
	}
	if masked == text {
		return map[string]any{"allow": true} // publish as sent: the cheapest answer
	}
	msg["text"] = masked
	delete(msg, "type") // a chat message; scalechat sets room, seq and server_at itself
	delete(msg, "room")
	return map[string]any{"allow": true, "message": msg}
}

// replaceFold replaces every case-insensitive match of old (ASCII) in s.
func replaceFold(s, old, new string) string {
	var out strings.Builder
	lower, o := strings.ToLower(s), strings.ToLower(old)
	for {
		i := strings.Index(lower, o)
		if i < 0 || len(lower) != len(s) { // a case change that moved bytes: leave the rest as is
			out.WriteString(s)
			return out.String()
		}
		out.WriteString(s[:i])
		out.WriteString(new)
		s, lower = s[i+len(old):], lower[i+len(o):]
	}
}
