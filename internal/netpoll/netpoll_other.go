//go:build !linux

package netpoll

// Poller is unavailable on this system.
type Poller struct{}

// New returns ErrUnsupported on this system.
func New(batch int) (*Poller, error) { return nil, ErrUnsupported }

// Add is unavailable on this system.
func (p *Poller) Add(fd int, events uint32) error { return ErrUnsupported }

// Mod is unavailable on this system.
func (p *Poller) Mod(fd int, events uint32) error { return ErrUnsupported }

// Del is unavailable on this system.
func (p *Poller) Del(fd int) error { return ErrUnsupported }

// Wake is unavailable on this system.
func (p *Poller) Wake() error { return ErrUnsupported }

// Wait is unavailable on this system.
func (p *Poller) Wait(timeoutMs int) ([]Event, bool, error) { return nil, false, ErrUnsupported }

// Close is unavailable on this system.
func (p *Poller) Close() error { return ErrUnsupported }
