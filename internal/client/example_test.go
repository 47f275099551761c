package client_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/scalechat/scalechat/internal/client"
)

// The example of docs/clients.md: compiled by go test, not run (it needs a
// server on 127.0.0.1:8080).
func Example() {
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
