//go:build linux

package server

import (
	"bytes"
	"net/http"
	"net/url"
	"strings"
)

// upgradeView is what the checks of an upgrade (parseUpgrade, admit,
// prepare, loopRoute) read of its request. net/http's handler fills it
// from its *http.Request (viewOfRequest), a loop from the head it read
// (parse), so that both ways run the same checks on the same fields.
type upgradeView struct {
	method      string
	host        string
	path        string // unescaped, as url.URL.Path: what refusals log
	escapedPath string // as url.URL.EscapedPath: what routes
	remoteAddr  string
	body        bool // a Content-Length other than 0, or a Transfer-Encoding
	query       upgradeQuery

	// The headers the upgrade reads: every value of the list-valued ones,
	// the first of the others (http.Header's Values and Get).
	connection, upgrade, extensions, protocols []string
	version, key, authorization, origin        string

	lists [4]string // parse's backing of the list-valued headers
}

// upgradeQuery holds the query parameters an upgrade reads: the first
// value of each, as url.Values.Get.
type upgradeQuery struct {
	since, epoch, name, presence, token string
}

// maxFastPairs is the number of '&' up to which queryOf splits a query
// itself; past it url.ParseQuery does, with its own limit on parameters.
const maxFastPairs = 64

// queryOf returns the parameters an upgrade reads from a raw query, as
// url.URL.Query would: a query with nothing to unescape and no ';' is
// split in place, without allocating; any other goes to url.ParseQuery.
func queryOf(raw string) upgradeQuery {
	var q upgradeQuery
	if strings.ContainsAny(raw, "%+;") || strings.Count(raw, "&") > maxFastPairs {
		vals, _ := url.ParseQuery(raw) // as url.URL.Query: the pairs that parse
		q.since, q.epoch, q.name = vals.Get("since"), vals.Get("epoch"), vals.Get("name")
		q.presence, q.token = vals.Get("presence"), vals.Get("token")
		return q
	}
	var seen uint8
	for raw != "" {
		var pair string
		pair, raw, _ = strings.Cut(raw, "&")
		k, v, _ := strings.Cut(pair, "=")
		var dst *string
		var bit uint8
		switch k {
		case "since":
			dst, bit = &q.since, 1
		case "epoch":
			dst, bit = &q.epoch, 2
		case "name":
			dst, bit = &q.name, 4
		case "presence":
			dst, bit = &q.presence, 8
		case "token":
			dst, bit = &q.token, 16
		default:
			continue
		}
		if seen&bit == 0 {
			*dst, seen = v, seen|bit
		}
	}
	return q
}

// viewOfRequest is the view of a request net/http parsed.
func viewOfRequest(r *http.Request) upgradeView {
	return upgradeView{
		method:        r.Method,
		host:          r.Host,
		path:          r.URL.Path,
		escapedPath:   r.URL.EscapedPath(),
		remoteAddr:    r.RemoteAddr,
		body:          r.ContentLength != 0 || len(r.TransferEncoding) > 0,
		query:         queryOf(r.URL.RawQuery),
		connection:    r.Header.Values("Connection"),
		upgrade:       r.Header.Values("Upgrade"),
		extensions:    r.Header.Values("Sec-WebSocket-Extensions"),
		protocols:     r.Header.Values("Sec-WebSocket-Protocol"),
		version:       r.Header.Get("Sec-WebSocket-Version"),
		key:           r.Header.Get("Sec-WebSocket-Key"),
		authorization: r.Header.Get("Authorization"),
		origin:        r.Header.Get("Origin"),
	}
}

// Header fields parse knows; a bit each, to refuse a repeated one.
const (
	fieldHost = 1 << iota
	fieldUpgrade
	fieldConnection
	fieldExtensions
	fieldProtocols
	fieldVersion
	fieldKey
	fieldAuthorization
	fieldOrigin
)

// parse fills v from a complete request head (through its blank line) of
// a GET, and reports whether the head is in the plain form a loop
// answers: "GET origin-form HTTP/1.1", CRLF line ends, header names that
// are tokens and values of visible ASCII, space and tab, one Host, at
// most one line of each header the upgrade reads, and no header that
// asks for a body or an expectation. Anything else (obs-fold, HTTP/1.0,
// an absolute-form target, bytes net/http may refuse, a body) is false:
// the request goes to net/http, which answers it as it always has.
//
// parse allocates two strings: the request line, whose slices a
// connection keeps (its room, name, epoch), and the header lines, which
// nothing keeps past the upgrade; a third when the path has percent
// escapes (its unescaped form, for logs). A connection so holds its
// request line, as it did with net/http's parser, not its whole head.
func (v *upgradeView) parse(head []byte) bool {
	*v = upgradeView{}
	i := bytes.Index(head, []byte("\r\n"))
	if i < 0 || !v.parseRequestLine(string(head[:i])) {
		return false
	}
	rest := string(head[i+2:])
	var line string
	var ok bool
	var seen uint16
	for {
		line, rest, ok = strings.Cut(rest, "\r\n")
		if !ok {
			return false
		}
		if line == "" {
			break
		}
		name, value, ok := strings.Cut(line, ":")
		if !ok || !isToken(name) || !isFieldValue(value) {
			return false
		}
		value = strings.Trim(value, " \t")
		var bit uint16
		switch {
		case strings.EqualFold(name, "Host"):
			if !isHost(value) {
				return false
			}
			v.host, bit = value, fieldHost
		case strings.EqualFold(name, "Upgrade"):
			v.lists[0], bit = value, fieldUpgrade
			v.upgrade = v.lists[0:1:1]
		case strings.EqualFold(name, "Connection"):
			v.lists[1], bit = value, fieldConnection
			v.connection = v.lists[1:2:2]
		case strings.EqualFold(name, "Sec-WebSocket-Extensions"):
			v.lists[2], bit = value, fieldExtensions
			v.extensions = v.lists[2:3:3]
		case strings.EqualFold(name, "Sec-WebSocket-Protocol"):
			v.lists[3], bit = value, fieldProtocols
			v.protocols = v.lists[3:4:4]
		case strings.EqualFold(name, "Sec-WebSocket-Version"):
			v.version, bit = value, fieldVersion
		case strings.EqualFold(name, "Sec-WebSocket-Key"):
			v.key, bit = value, fieldKey
		case strings.EqualFold(name, "Authorization"):
			v.authorization, bit = value, fieldAuthorization
		case strings.EqualFold(name, "Origin"):
			v.origin, bit = value, fieldOrigin
		case strings.EqualFold(name, "Content-Length"), strings.EqualFold(name, "Transfer-Encoding"),
			strings.EqualFold(name, "Expect"):
			return false // a body, or an expectation net/http answers
		}
		if seen&bit != 0 {
			return false
		}
		seen |= bit
	}
	return rest == "" && v.host != ""
}

// parseRequestLine reads "GET target HTTP/1.1" with an origin-form target
// of plain bytes (see isPathByte, isQueryByte).
func (v *upgradeView) parseRequestLine(line string) bool {
	target, ok := strings.CutPrefix(line, "GET ")
	if !ok {
		return false
	}
	target, ok = strings.CutSuffix(target, " HTTP/1.1")
	if !ok || target == "" || target[0] != '/' {
		return false
	}
	path, query, _ := strings.Cut(target, "?")
	escaped := false
	for i := 0; i < len(path); i++ {
		switch c := path[i]; {
		case c == '%':
			if i+2 >= len(path) || !isHex(path[i+1]) || !isHex(path[i+2]) {
				return false
			}
			escaped = true
		case !isPathByte(c):
			return false
		}
	}
	for i := 0; i < len(query); i++ {
		if !isQueryByte(query[i]) {
			return false
		}
	}
	v.method, v.escapedPath, v.path = http.MethodGet, path, path
	if escaped {
		p, err := url.PathUnescape(path)
		if err != nil {
			return false
		}
		v.path = p
	}
	v.query = queryOf(query)
	return true
}

// isPathByte reports whether c may stand unescaped in a path that
// url.URL.EscapedPath returns as it came: unreserved, sub-delims, ':',
// '@' and '/' (RFC 3986 pchar).
func isPathByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("-._~!$&'()*+,;=:@/", c) >= 0
}

// isQueryByte reports whether c may stand in a query (RFC 3986: pchar,
// '/', '?', and '%' of an escape, which url.ParseQuery checks).
func isQueryByte(c byte) bool { return isPathByte(c) || c == '?' || c == '%' }

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// isToken reports whether s is a header name (RFC 9110 token).
func isToken(s string) bool { return s != "" && alnumOr(s, "!#$%&'*+-.^_`|~") }

// isFieldValue reports whether a header value holds only visible ASCII,
// spaces and tabs: obs-text and control bytes are net/http's to judge.
func isFieldValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c != '\t' && (c < ' ' || c > '~') {
			return false
		}
	}
	return true
}

// isHost reports whether s is a plain Host value: a name or address and
// port of letters, digits, '.', '-', '_', ':', '[' and ']'.
func isHost(s string) bool { return alnumOr(s, ".-_:[]") }

// alnumOr reports whether every byte of s is an ASCII letter, a digit or
// one of punct.
func alnumOr(s, punct string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
			continue
		}
		if strings.IndexByte(punct, c) < 0 {
			return false
		}
	}
	return true
}
