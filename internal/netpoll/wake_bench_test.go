//go:build linux

package netpoll

import "testing"

// BenchmarkWake is one event loop waking another, parked in Wait without a
// limit: Wake, the Wait it ends, and the waiter's answer on a channel (the
// same in every version, so that two versions of Wake compare). A cluster
// node pays one a batch from Redis, a node with several loops one per
// message a loop hands to another.
func BenchmarkWake(b *testing.B) {
	p, err := New(8)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	ack, done, exited := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		for {
			_, woken, err := p.Wait(-1)
			if err != nil {
				b.Error(err)
				return
			}
			if !woken {
				continue
			}
			select {
			case ack <- struct{}{}:
			case <-done:
				return
			}
		}
	}()
	b.ReportAllocs()
	for b.Loop() {
		if err := p.Wake(); err != nil {
			b.Fatal(err)
		}
		<-ack
	}
	close(done)
	_ = p.Wake()
	<-exited
}
