package hooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"unicode/utf8"

	"github.com/scalechat/scalechat/internal/protocol"
)

// ConnectRequest is the body of a connect call: a client asks to open a
// connection. Time is the node's clock in Unix milliseconds, so that a
// backend can refuse a replayed request.
type ConnectRequest struct {
	Hook   string `json:"hook"`
	Node   string `json:"node"`
	Time   int64  `json:"time"`
	Room   string `json:"room"`   // the room of the URL
	User   string `json:"user"`   // the token's subject, when the server checks tokens
	Name   string `json:"name"`   // ?name=, the name the client gives itself
	Remote string `json:"remote"` // the client's address
	Origin string `json:"origin,omitempty"`
	Token  string `json:"token,omitempty"` // ?token= or the bearer token, when the server does not check tokens itself
}

// ConnectAnswer is the backend's answer to a connect call.
type ConnectAnswer struct {
	Allow  bool            `json:"allow"`
	Reason string          `json:"reason,omitempty"` // refused: what the client is told
	Status int             `json:"status,omitempty"` // refused: the HTTP status, 400–499 (default 403)
	User   string          `json:"user,omitempty"`   // allowed: who the connection is (like a token's subject)
	Data   json.RawMessage `json:"data,omitempty"`   // allowed: handed back in the connection's join and publish calls
	Rooms  []string        `json:"rooms,omitempty"`  // allowed: rooms the connection joins besides the URL's
}

func (a *ConnectAnswer) verdict() (bool, string) { return a.Allow, a.Reason }

// MaxData bounds a connect answer's data: it is held per connection.
const MaxData = 4 << 10

// check refuses an answer the server could not apply, as a failed call.
func (a *ConnectAnswer) check() (Outcome, error) {
	if !a.Allow {
		if a.Status != 0 && (a.Status < 400 || a.Status > 499) {
			return Error, fmt.Errorf("the connect hook's status %d is not between 400 and 499", a.Status)
		}
		return Refused, nil
	}
	if !protocol.ValidUser(a.User) {
		return Error, fmt.Errorf("the connect hook's user %q is invalid: %s", a.User, protocol.UserRule)
	}
	if len(a.Data) > MaxData {
		return Error, fmt.Errorf("the connect hook's data is larger than %d bytes", MaxData)
	}
	for _, r := range a.Rooms {
		if !protocol.ValidRoomString(r) {
			return Error, fmt.Errorf("the connect hook's room %q is not a valid room name", r)
		}
	}
	return Allowed, nil
}

// Connect asks the backend whether a connection may open. It blocks for up
// to the timeout: never call it on an event loop.
func (c *Client) Connect(ctx context.Context, req ConnectRequest) (ConnectAnswer, Verdict) {
	// Wait for a turn (Workers in flight at most) within the timeout: a
	// call that gets none failed, as if the backend had not answered.
	turn, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	select {
	case c.connects <- struct{}{}:
		defer func() { <-c.connects }()
	case <-turn.Done():
		h := c.hooks[Connect]
		return ConnectAnswer{}, h.fail(Timeout, fmt.Errorf("the connect hook had %d calls in flight for %s: %w", c.cfg.Workers, c.cfg.Timeout, turn.Err()))
	}
	req.Hook, req.Node, req.Time = Connect.String(), c.node, nowMilli()
	var a ConnectAnswer
	v := c.call(ctx, Connect, &req, &a, a.check)
	if v.Failed() {
		return ConnectAnswer{}, v
	}
	if !v.Allow && a.Status == 0 {
		a.Status = http.StatusForbidden
	}
	return a, v
}

// JoinRequest is the body of a join call: a connection asks to join a room.
type JoinRequest struct {
	Hook       string `json:"hook"`
	Node       string `json:"node"`
	Time       int64  `json:"time"`
	Connection string `json:"connection"` // the connection's id (as in the joined frame and the server API)
	// User is who it is, verified: the token's subject or the connect
	// hook's user; "" when neither names it.
	User string `json:"user"`
	// Name is the ?name= the client gave itself, unverified, when no token
	// nor connect hook names it: never called user.
	Name string          `json:"name,omitempty"`
	Room string          `json:"room"`
	Data json.RawMessage `json:"data,omitempty"` // the connect hook's data for this connection
}

// JoinAnswer is the backend's answer to a join call.
type JoinAnswer struct {
	Allow  bool   `json:"allow"`
	Reason string `json:"reason,omitempty"`
}

func (a *JoinAnswer) verdict() (bool, string) { return a.Allow, a.Reason }

// Join asks the backend whether a connection may join a room. It blocks.
func (c *Client) Join(ctx context.Context, req JoinRequest) Verdict {
	req.Hook, req.Node, req.Time = Join.String(), c.node, nowMilli()
	var a JoinAnswer
	return c.call(ctx, Join, &req, &a, nil)
}

// PublishRequest is the body of a publish call: a chat message about to be
// ordered in its room.
type PublishRequest struct {
	Hook       string          `json:"hook"`
	Node       string          `json:"node"`
	Time       int64           `json:"time"`
	Connection string          `json:"connection"`
	User       string          `json:"user"`           // as in JoinRequest: verified, or ""
	Name       string          `json:"name,omitempty"` // as in JoinRequest: the unverified ?name=
	Room       string          `json:"room"`
	Message    json.RawMessage `json:"message"` // the client's JSON object, as it sent it
	Data       json.RawMessage `json:"data,omitempty"`
}

// PublishAnswer is the backend's answer to a publish call.
type PublishAnswer struct {
	Allow   bool            `json:"allow"`
	Reason  string          `json:"reason,omitempty"`
	Message json.RawMessage `json:"message,omitempty"` // allowed: the message to publish instead
}

func (a *PublishAnswer) verdict() (bool, string) { return a.Allow, a.Reason }

// Publish asks the backend whether a message may be published, and what
// to publish. The message returned is the one to publish: the client's, or
// the backend's replacement (already checked to be a valid chat message,
// with the client's message_id when it names none). It blocks.
func (c *Client) Publish(ctx context.Context, req PublishRequest) (json.RawMessage, Verdict) {
	req.Hook, req.Node, req.Time = Publish.String(), c.node, nowMilli()
	var a PublishAnswer
	var replaced json.RawMessage
	check := func() (Outcome, error) {
		if !a.Allow || len(a.Message) == 0 {
			return Allowed, nil
		}
		var err error
		replaced, err = replacement(req.Message, a.Message)
		return Replaced, err
	}
	v := c.call(ctx, Publish, &req, &a, check)
	if v.Outcome != Replaced {
		return req.Message, v
	}
	return replaced, v
}

// replacement checks a backend's message and gives it the original's
// message_id when it has none, so that the sender's client still sees its
// message acknowledged.
func replacement(orig, repl json.RawMessage) (json.RawMessage, error) {
	if !utf8.Valid(repl) {
		return nil, errors.New("the publish hook's message is not valid UTF-8")
	}
	var f protocol.Frame
	if err := protocol.ParseFrame(repl, &f); err != nil {
		return nil, fmt.Errorf("the publish hook's message is not a valid chat message: %w", err)
	}
	if f.Kind != protocol.KindMessage {
		return nil, errors.New("the publish hook's message is not a chat message (it has a type)")
	}
	if f.HasMessageID {
		return repl, nil
	}
	var o protocol.Frame
	if protocol.ParseFrame(orig, &o) != nil || !o.HasMessageID {
		return repl, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(repl, &m); err != nil {
		return nil, fmt.Errorf("the publish hook's message: %w", err)
	}
	m["message_id"] = json.RawMessage(fmt.Sprint(o.MessageID))
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("the publish hook's message: %w", err)
	}
	return b, nil
}
