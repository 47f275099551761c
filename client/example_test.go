//go:build linux

package client_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"time"

	"github.com/scalechat/scalechat/client"
	"github.com/scalechat/scalechat/internal/server"
)

// Two clients in one room: every message reaches every member, its sender
// included, with the room's sequence number.
func Example() {
	url, stop := startExampleServer() // a scalechat server on a loopback port
	defer stop()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	alice, err := client.Dial(ctx, client.Config{URL: url, Room: "lobby", Sender: "alice"})
	if err != nil {
		log.Fatal(err)
	}
	defer alice.Close() // close 1000, waits briefly for the server's close
	bob, err := client.Dial(ctx, client.Config{URL: url, Room: "lobby", Sender: "bob"})
	if err != nil {
		log.Fatal(err)
	}
	defer bob.Close()

	// Events arrive on a channel; read it in its own goroutine in a real
	// program: Send waits while the client reconnects, and reconnecting
	// needs the replayed messages to be read.
	waitFor := func(c *client.Client) *client.Message {
		for ev := range c.Events() {
			if m, ok := ev.(*client.Message); ok {
				return m
			}
		}
		return nil
	}
	if _, err := alice.Send(ctx, "hello bob"); err != nil {
		log.Fatal(err)
	}
	m := waitFor(bob)
	fmt.Printf("bob got #%d from %s: %s\n", m.Seq, m.Sender, m.Text)
	m = waitFor(alice)
	fmt.Printf("alice got her own #%d back (own: %v)\n", m.Seq, m.Own)
	// Output:
	// bob got #1 from alice: hello bob
	// alice got her own #1 back (own: true)
}

// Many rooms over one connection, and what a program watches for. This is
// the example of docs/clients.md: compiled by go test, not run (it needs a
// server on 127.0.0.1:8080).
func Example_rooms() {
	ctx := context.Background()
	c, err := client.Dial(ctx, client.Config{
		URL:     "ws://127.0.0.1:8080/ws",
		Room:    "room1",
		Sender:  "bot",
		Backoff: client.Backoff{Initial: 250 * time.Millisecond, Max: 10 * time.Second},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close() // close 1000, waits briefly for the server's close

	// Read events in their own goroutine: Send waits while reconnecting,
	// and reconnecting needs the replayed messages to be read.
	go func() {
		for ev := range c.Events() {
			switch e := ev.(type) {
			case *client.Message:
				fmt.Printf("#%d %s: %s\n", e.Seq, e.Sender, e.Text)
			case *client.HistoryGap:
				fmt.Println("some messages were lost:", e.Room)
			case *client.State:
				fmt.Println("connection:", e.State, e.Err)
			}
		}
	}()

	if _, err := c.Send(ctx, "hello"); err != nil {
		log.Fatal(err)
	}
	if err := c.Join(ctx, "room2"); err != nil {
		log.Fatal(err)
	}
	if _, err := c.SendTo(ctx, "room2", "hello room2"); err != nil {
		log.Fatal(err)
	}
	// Wait until the server has echoed both.
	fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := c.Flush(fctx); err != nil {
		log.Fatal(err)
	}
}

// startExampleServer runs a single-node server on 127.0.0.1 and returns its
// WebSocket endpoint and a function that stops it.
func startExampleServer() (url string, stop func()) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	cfg := server.DefaultConfig()
	cfg.Loops = 1
	srv, err := server.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	return "ws://" + ln.Addr().String() + "/ws", func() { cancel(); <-done }
}
